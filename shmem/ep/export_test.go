package ep

// Test access to the device results (DeviceRecv and CombineOnStream's output lie in the buffer's
// device allocation; users read them with device code or the blocking forms).

// FetchRecv copies the latest DispatchOnStream's results to the host (its stream has run it).
func FetchRecv(b *Buffer) (*Recv, error) { return b.fetchRecv("FetchRecv") }

// FetchOut copies CombineOnStream's output t to the host (its stream has run it).
func FetchOut(b *Buffer, t DeviceTokens) (Tokens, error) {
	out := makeTokens(b.cfg.DType, t.Rows*b.cfg.Hidden)
	return out, b.get("FetchOut", int(t.Ptr-b.dev.base), out.bytes(b.cfg.DType))
}
