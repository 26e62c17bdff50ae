// go-etcd-mutex: etcd's own Go lock, concurrency.Mutex on a concurrency.Session (etcd 3.4's
// clientv3, from Debian's golang-etcd-server-dev), driven over the lock-harness protocol.
//
// The session is a lease with the run's TTL that the client library keeps alive in the
// background; a new one is made when the old one is gone (Session.Done). acquire is
// Mutex.Lock with the acquire's timeout, then what a careful user does for a fencing token:
// one transaction "if I am still the owner (Mutex.IsOwner), read my key" — the token is the
// key's create revision. release is Mutex.Unlock. held is "the session is not Done".
package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/version"
)

type grant struct {
	mutex   *concurrency.Mutex
	session *concurrency.Session
}

type etcdMutex struct {
	cli       *clientv3.Client
	ttl       int
	opTimeout time.Duration
	prefix    string
	session   *concurrency.Session
	grants    map[int64]grant
	next      int64
}

func (e *etcdMutex) describe() reply {
	return reply{"name": "go-etcd-mutex", "version": "etcd clientv3 " + version.Version,
		"tokens": true, "features": []string{"held"}}
}

func (e *etcdMutex) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.opTimeout)
}

// currentSession is the live session, or a new one on a lease granted within the op timeout.
func (e *etcdMutex) currentSession() (*concurrency.Session, error) {
	if e.session != nil {
		select {
		case <-e.session.Done():
			e.session = nil
		default:
			return e.session, nil
		}
	}
	ctx, cancel := e.op()
	defer cancel()
	lease, err := e.cli.Grant(ctx, int64(e.ttl))
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(e.cli, concurrency.WithLease(lease.ID))
	if err != nil {
		return nil, err
	}
	e.session = s
	return s, nil
}

// abandon stops keeping the session alive: a key of ours that may still be queued goes with
// its lease, after the TTL at the latest.
func (e *etcdMutex) abandon(s *concurrency.Session) {
	s.Orphan()
	ctx, cancel := e.op()
	defer cancel()
	e.cli.Revoke(ctx, s.Lease())
	if e.session == s {
		e.session = nil
	}
}

func (e *etcdMutex) acquire(timeout float64) reply {
	s, err := e.currentSession()
	if err != nil {
		return info("session: " + err.Error())
	}
	m := concurrency.NewMutex(s, "/mutex/"+lockName)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout*float64(time.Second)))
	err = m.Lock(ctx)
	// Our deadline passed (grpc may report it as an error of its own, code Unknown).
	timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if !timedOut {
			e.abandon(s)
			return info("Lock: " + err.Error())
		}
		// Timed out. Lock deletes our queued key before it returns (its Key() is then
		// "\x00"); if that delete failed, make sure, or the key would hold the lock later.
		if m.Key() != "\x00" {
			dctx, dcancel := e.op()
			_, derr := e.cli.Delete(dctx, m.Key())
			dcancel()
			if derr != nil {
				e.abandon(s)
				return info("timed out, and leaving the queue failed: " + derr.Error())
			}
		}
		return fail("timeout: lock busy")
	}
	ctx, cancel = e.op()
	resp, err := e.cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpGet(m.Key())).Commit()
	cancel()
	if err != nil {
		return info("reading the token: " + err.Error())
	}
	if !resp.Succeeded || len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return fail("not the owner any more: the session expired while waiting")
	}
	e.next++
	e.grants[e.next] = grant{m, s}
	return ok(reply{"token": resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision,
		"validity": e.ttl, "handle": e.next})
}

func (e *etcdMutex) release(handle int64) reply {
	g, found := e.grants[handle]
	if !found {
		return info(fmt.Sprintf("no grant %d here", handle))
	}
	delete(e.grants, handle)
	ctx, cancel := e.op()
	defer cancel()
	if err := g.mutex.Unlock(ctx); err != nil {
		return info("Unlock: " + err.Error())
	}
	return ok(reply{})
}

func (e *etcdMutex) held(handle int64) reply {
	g, found := e.grants[handle]
	if !found {
		return ok(reply{"held": false})
	}
	select {
	case <-g.session.Done():
		return ok(reply{"held": false})
	default:
		return ok(reply{"held": true})
	}
}

func (e *etcdMutex) handle(req request) reply {
	switch req.Op {
	case "acquire":
		return e.acquire(req.Timeout)
	case "release":
		return e.release(req.Handle)
	case "held":
		return e.held(req.Handle)
	}
	return info("no op " + req.Op)
}

var lockName string

func main() {
	serve(func(h hello) (lockClient, error) {
		lockName = h.Lock
		endpoints := make([]string, len(h.Nodes))
		for i, n := range h.Nodes {
			endpoints[i] = fmt.Sprintf("%s:%d", n.Host, n.Port)
		}
		opTimeout := time.Duration(h.OpTimeout * float64(time.Second))
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: opTimeout})
		if err != nil {
			return nil, err
		}
		ttl := int(math.Max(1, math.Ceil(h.TTL))) // leases are whole seconds: never shorter
		logf("endpoints %v, session TTL %d s", endpoints, ttl)
		return &etcdMutex{cli: cli, ttl: ttl, opTimeout: opTimeout, grants: map[int64]grant{}}, nil
	})
	os.Exit(0)
}
