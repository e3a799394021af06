package bootstrap

import (
	"context"
	"fmt"
	"time"
)

// joinTree is Dial in tree mode: listen at this PE's derived address (before joining, so that
// its children can join it as soon as they start), then join the parent.
func (c *Client) joinTree(ctx context.Context, call string, cfg Config) error {
	shape := treeShape{n: c.rank.NPEs, k: cfg.Fanout}
	n := newNode(c.rank.PE, shape, c.rank.Token, cfg.Net, cfg.PEAddr, c.timeout, &c.stats)
	n.onFail = func(e *PeerError) {
		if e.Aborted && e.PE != c.rank.PE {
			select {
			case c.exits <- e.Status:
			default:
			}
		}
		c.fail(e)
	}
	addr := cfg.PEAddr(c.rank.PE)
	ln, err := cfg.Net.Listen(addr)
	if err != nil {
		return fmt.Errorf("%s: listening for its children in the bootstrap tree at %s: %w", call, addr, err)
	}
	n.listen(ln)
	parent := c.addr
	if p := shape.parent(c.rank.PE); p >= 0 {
		parent = cfg.PEAddr(p)
	}
	l, err := n.join(ctx, parent, call)
	if err != nil {
		n.stop()
		return err
	}
	n.parent = l
	c.tree = n
	n.wg.Add(1)
	go n.readParent()
	close(c.readerDone)
	return nil
}

// await waits for a tree-mode reply, the context, the timeout or the job's failure.
func (c *Client) await(ctx context.Context, name string, ch <-chan reply, forget func(), waiting func() string) ([]byte, error) {
	callErr := func(err error) error { return &CallError{Call: name, PE: c.rank.PE, Err: err} }
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if !r.ok {
			return nil, callErr(fmt.Errorf("%s", r.data))
		}
		return r.data, nil
	case <-c.failed:
		forget()
		return nil, callErr(c.Err())
	case <-ctx.Done():
		forget()
		return nil, callErr(ctx.Err())
	case <-t.C:
		forget()
		return nil, callErr(&TimeoutError{After: c.timeout, Waiting: waiting()})
	}
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
	name := fmt.Sprintf("Put(%q)", key)
	if err := c.usable(); err != nil {
		return &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	pe := owner(key, c.rank.NPEs)
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
		func() string { return fmt.Sprintf("PE %d, the key's owner, to store it", pe) })
	return err
}

func (c *Client) treeGet(ctx context.Context, key string) ([]byte, error) {
	name := fmt.Sprintf("Get(%q)", key)
	if err := c.usable(); err != nil {
		return nil, &CallError{Call: name, PE: c.rank.PE, Err: err}
	}
	pe := owner(key, c.rank.NPEs)
	waiting := func() string { return fmt.Sprintf("key %q (owned by PE %d)", key, pe) }
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
