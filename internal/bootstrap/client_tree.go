package bootstrap

import (
	"context"
	"fmt"
	"time"
)

// joinTree is Dial in tree mode: listen at this PE's derived address (before joining, so that
// its children can join it as soon as they start), then join the parent.
func (c *Client) joinTree(ctx context.Context, call string, cfg Config) error {
	shape, err := newShape(c.rank.NPEs, cfg.Fanout, cfg.Layout)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	addrOf := cfg.Lookup
	var hier *treeAddrs
	switch {
	case cfg.Layout != nil:
		j, _ := shape.locate(c.rank.PE)
		hier = &treeAddrs{c: c, node: j, cache: map[int]string{}}
		addrOf = hier.addrOf
	case addrOf == nil:
		addrOf = func(_ context.Context, pe int) (string, error) { return cfg.PEAddr(pe), nil }
	}
	n := newNode(c.rank.PE, shape, c.rank.Token, cfg.Net, addrOf, c.timeout, &c.stats)
	n.local = cfg.PEAddr
	c.tree = n
	n.onFail = func(e *PeerError) {
		if e.Aborted && e.PE != c.rank.PE {
			select {
			case c.exits <- e.Status:
			default:
			}
		}
		c.fail(e)
	}
	ln := cfg.Listener
	if ln == nil {
		addr := cfg.PEAddr(c.rank.PE)
		var err error
		if ln, err = cfg.Net.Listen(addr); err != nil {
			return fmt.Errorf("%s: listening for its children in the bootstrap tree at %s: %w", call, addr, err)
		}
	}
	n.listen(ln)
	parent := c.addr
	switch p := shape.parent(c.rank.PE); {
	case hier != nil && shape.isLeader(c.rank.PE):
		listen := tcpListen
		if cfg.LeaderAddr != nil {
			j, _ := shape.locate(c.rank.PE)
			listen = cfg.LeaderAddr(j)
		}
		if parent, err = c.joinLeader(ctx, call, cfg.Net, listen); err != nil {
			c.stopTree()
			return err
		}
	case p >= 0:
		if parent, err = addrOf(ctx, p); err != nil {
			c.stopTree()
			return fmt.Errorf("%s: the address of PE %d, its parent in the bootstrap tree: %w", call, p, err)
		}
	}
	l, err := n.join(ctx, parent, call)
	if err != nil {
		c.stopTree()
		return err
	}
	n.parent = l
	n.wg.Add(1)
	go n.readParent()
	close(c.readerDone)
	return nil
}

// stopTree undoes a joinTree that failed.
func (c *Client) stopTree() {
	c.tree.stop()
	c.tree = nil
}

// await waits for a call's reply (from the server, or in tree mode the PE's node), the context,
// the timeout or the job's failure.
func (c *Client) await(ctx context.Context, name string, ch <-chan reply, forget func(), waiting func() string) ([]byte, error) {
	callErr := func(err error) error { return &CallError{Call: name, PE: c.rank.PE, Err: err} }
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	var r reply
	select {
	case r = <-ch:
	case <-c.failed:
		// The reader hands a reply over before it fails the client at the connection's end (the
		// server's last acknowledgement, then its close), and select picks at random among ready
		// cases: a reply already delivered answers the call.
		select {
		case r = <-ch:
		default:
			forget()
			return nil, callErr(c.Err())
		}
	case <-ctx.Done():
		forget()
		return nil, callErr(ctxErr(ctx, waiting))
	case <-t.C:
		forget()
		return nil, callErr(&TimeoutError{After: c.timeout, Waiting: waiting()})
	}
	if !r.ok {
		return nil, callErr(fmt.Errorf("server: %s", r.data))
	}
	return r.data, nil
}

// usable is the error a call gets before it starts, if any.
func (c *Client) usable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrClosed
	}
	return c.err
}

func (c *Client) treePut(ctx context.Context, key string, val []byte) error {
	return c.putAt(ctx, fmt.Sprintf("Put(%q)", key), owner(key, c.rank.NPEs), key, val)
}

func (c *Client) treeGet(ctx context.Context, key string) ([]byte, error) {
	return c.getAt(ctx, fmt.Sprintf("Get(%q)", key), owner(key, c.rank.NPEs), key)
}

// putAt stores key in the directory of PE pe (-1: the root's).
func (c *Client) putAt(ctx context.Context, name string, pe int, key string, val []byte) error {
	if err := c.usable(); err != nil {
		return &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	if pe == c.rank.PE {
		c.tree.kvPut(key, val)
		return nil
	}
	o, err := c.tree.ownerOf(ctx, pe)
	if err != nil {
		return &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	id, ch, err := o.request(msgPut, func(e *enc) { e.str(key).bytes(val) })
	if err != nil {
		return &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	_, err = c.await(ctx, name, ch, func() { o.forget(id) },
		func() string { return fmt.Sprintf("%s, the key's owner, to store it", peName(pe)) })
	return err
}

// getAt reads key from the directory of PE pe (-1: the root's), waiting until it is there.
func (c *Client) getAt(ctx context.Context, name string, pe int, key string) ([]byte, error) {
	if err := c.usable(); err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	waiting := func() string { return fmt.Sprintf("key %q (owned by %s)", key, peName(pe)) }
	if pe == c.rank.PE {
		local := make(chan []byte, 1)
		if v, ok := c.tree.kvGet(key, kvWaiter{ch: local}); ok {
			return v, nil
		}
		ch := make(chan reply, 1)
		go func() {
			select {
			case v := <-local:
				ch <- reply{ok: true, data: v}
			case <-c.failed:
			case <-time.After(c.timeout + time.Second):
			}
		}()
		return c.await(ctx, name, ch, func() { c.tree.dropWaiter(key, local) }, waiting)
	}
	o, err := c.tree.ownerOf(ctx, pe)
	if err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	id, ch, err := o.request(msgGet, func(e *enc) { e.str(key) })
	if err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	return c.await(ctx, name, ch, func() { o.forget(id) }, waiting)
}

func peName(pe int) string {
	if pe < 0 {
		return "the root"
	}
	return fmt.Sprintf("PE %d", pe)
}

func (c *Client) treeColl(ctx context.Context, name string, key collKey, val []byte) ([][]byte, error) {
	if err := c.usable(); err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	res, err := c.tree.contribute(key, val)
	if err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	ch := make(chan reply, 1)
	stop := make(chan struct{})
	defer close(stop)
	var vals [][]byte
	go func() {
		select {
		case vals = <-res:
			ch <- reply{ok: true}
		case <-stop:
		}
	}()
	if _, err := c.await(ctx, name, ch, func() {}, func() string { return c.tree.missing(key) }); err != nil {
		return nil, err
	}
	return vals, nil
}

// closeTree is Close in tree mode: the goodbye wave (node.leave), then every link closes.
func (c *Client) closeTree(failed bool) error {
	var err error
	if !failed {
		err = c.tree.leave(time.Now().Add(c.timeout))
	}
	c.tree.stop()
	if c.server != nil {
		c.server.Close()
	}
	if c.pmix != nil {
		if ferr := c.pmix.Finalize(); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return &CallError{Call: "Close", PE: c.rank.PE, Err: err}
	}
	return nil
}
