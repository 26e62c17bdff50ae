'use strict';
// npm's etcd3 lock() as its README uses it: client.lock(name).ttl(seconds).acquire(), which
// puts the key with a fresh lease if it does not exist and fails at once otherwise (the
// caller retries: every 100 ms until the acquire's timeout); the client keeps the lease
// alive while held; release() revokes it. held: the lease has not emitted 'lost'.
// No fencing tokens.
const { Etcd3, EtcdLockFailedError } = require('etcd3');
const { serve, version, poll, Handles, notHere, log, message } = require('./protocol');

serve(async (hello) => {
  const client = new Etcd3({ hosts: hello.nodes.map((n) => `http://${n.host}:${n.port}`) });
  const ttl = Math.max(1, Math.round(hello.ttl)); // etcd leases are whole seconds
  const grants = new Handles();

  async function attempt() {
    const lock = client.lock(hello.lock).ttl(ttl);
    try {
      await lock.acquire();
    } catch (e) {
      if (e instanceof EtcdLockFailedError) return null;
      throw e;
    }
    const grant = { lock, lost: false };
    lock.lease.on('lost', (e) => { grant.lost = true; log(`lease lost: ${message(e)}`); });
    return grant;
  }

  return {
    describe: { name: 'etcd3-lock', version: version('etcd3'), tokens: false, features: ['held'] },
    async acquire({ timeout }) {
      const grant = await poll(timeout, attempt, 100);
      if (!grant) return { type: 'fail', error: 'lock busy' };
      return { type: 'ok', validity: ttl, handle: grants.add(grant) };
    },
    async release({ handle }) {
      const grant = grants.take(handle);
      if (!grant) return notHere(handle);
      await grant.lock.release();
      return grant.lost ? { type: 'fail', error: 'lost: its lease' } : { type: 'ok' };
    },
    async held({ handle }) {
      const grant = grants.get(handle);
      return { type: 'ok', held: !!grant && !grant.lost };
    },
  };
});
