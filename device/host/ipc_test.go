package host

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/device"
)

// The child side of TestTwoProcesses runs in a re-executed test binary.
const childEnv = "ROX_HOST_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const ipcSize = 1 << 16

// pattern is the bytes a process with seed writes.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func word(p device.Ptr) *uint64 { return (*uint64)(unsafe.Pointer(&Bytes(p, 8)[0])) }

// child imports the parent's memory (handle in $ROX_HOST_TEST_HANDLE), checks the parent's
// pattern, writes its own into the second half, exports memory of its own, prints its handle,
// then waits for the parent to store a pattern and a flag into it.
func child() error {
	seed, err := strconv.ParseUint(os.Getenv("ROX_HOST_TEST_SEED"), 10, 64)
	if err != nil {
		return err
	}
	h, err := hex.DecodeString(os.Getenv("ROX_HOST_TEST_HANDLE"))
	if err != nil {
		return err
	}
	d, err := New().Open(1)
	if err != nil {
		return err
	}
	defer d.Close()
	peer, err := d.Import(h)
	if err != nil {
		return err
	}
	if got, want := Bytes(peer, ipcSize/2), pattern(seed, ipcSize/2); !bytes.Equal(got, want) {
		return errors.New("parent's pattern not seen in imported memory")
	}
	// Write through the driver (CopyHtoD) into the peer's memory.
	if err := d.CopyHtoD(peer.Add(ipcSize/2), pattern(seed+1, ipcSize/2)); err != nil {
		return err
	}
	mine, err := d.Alloc(ipcSize)
	if err != nil {
		return err
	}
	if err := d.CopyHtoD(mine, pattern(seed+2, ipcSize)); err != nil {
		return err
	}
	mh, err := d.Export(mine)
	if err != nil {
		return err
	}
	fmt.Printf("handle %x\n", mh)
	// The parent overwrites bytes [8, ipcSize) with pattern seed+3, then stores 1 into word 0.
	for deadline := time.Now().Add(20 * time.Second); atomic.LoadUint64(word(mine)) != 1; {
		if time.Now().After(deadline) {
			return errors.New("parent's flag never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if !bytes.Equal(Bytes(mine.Add(8), ipcSize-8), pattern(seed+3, ipcSize)[8:]) {
		return errors.New("parent's stores into exported memory not seen")
	}
	if err := d.CloseImport(peer); err != nil {
		return err
	}
	fmt.Println("ok")
	return nil
}

func TestTwoProcesses(t *testing.T) {
	d := open(t, 0)
	seed := rand.Uint64() >> 2
	p, err := d.Alloc(ipcSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyHtoD(p, pattern(seed, ipcSize/2)); err != nil {
		t.Fatal(err)
	}
	h, err := d.Export(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1",
		fmt.Sprintf("ROX_HOST_TEST_SEED=%d", seed), fmt.Sprintf("ROX_HOST_TEST_HANDLE=%x", h))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cancel()
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "handle ") {
		cancel()
		cmd.Wait()
		t.Fatalf("child's first line %q, %v; stderr: %s", line, err, stderr.String())
	}
	// The child wrote its half of our memory before printing.
	if !bytes.Equal(Bytes(p.Add(ipcSize/2), ipcSize/2), pattern(seed+1, ipcSize/2)) {
		t.Fatal("child's stores into our exported memory not seen")
	}
	ch, err := hex.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "handle ")))
	if err != nil {
		t.Fatal(err)
	}
	q, err := d.Import(ch)
	if err != nil {
		t.Fatal(err)
	}
	// Copy the child's memory into ours through the driver and compare.
	local, err := d.Alloc(ipcSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyDtoD(local, q, ipcSize); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Bytes(local, ipcSize), pattern(seed+2, ipcSize)) {
		t.Fatal("copy from the child's exported memory differs from what it wrote")
	}
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CopyHtoDAsync(q.Add(8), pattern(seed+3, ipcSize)[8:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	atomic.StoreUint64(word(q), 1)
	line, err = r.ReadString('\n')
	if err != nil || line != "ok\n" {
		cancel()
		cmd.Wait()
		t.Fatalf("child's second line %q, %v; stderr: %s", line, err, stderr.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v; stderr: %s", err, stderr.String())
	}
	if err := d.CloseImport(q); err != nil {
		t.Fatal(err)
	}
	// The child has exited: its handle no longer opens.
	_, err = d.Import(ch)
	wantErr(t, err, device.ErrInvalid, "host.Import")
}
