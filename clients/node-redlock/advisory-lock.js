'use strict';
// npm's advisory-lock as its README uses it: advisoryLock(url)(name) gives a mutex on a
// PostgreSQL session advisory lock, tryLock() takes it on a new connection (retried every
// 100 ms until the acquire's timeout: lock() cannot be given one) and the unlock function it
// returns unlocks and closes that connection. No lease: the lock lives as long as the
// connection. No fencing tokens.
const createMutex = require('advisory-lock').default;
const { serve, version, poll, Handles, notHere } = require('./protocol');

serve(async (hello) => {
  const { host, port } = hello.nodes[0];
  const mutex = createMutex(`postgres://postgres@${host}:${port}/postgres`)(hello.lock);
  const grants = new Handles();
  return {
    describe: { name: 'advisory-lock', version: version('advisory-lock'), tokens: false },
    async acquire({ timeout }) {
      const unlock = await poll(timeout, () => mutex.tryLock(), 100);
      if (!unlock) return { type: 'fail', error: 'lock busy' };
      return { type: 'ok', validity: null, handle: grants.add(unlock) };
    },
    async release({ handle }) {
      const unlock = grants.take(handle);
      if (!unlock) return notHere(handle);
      await unlock();
      return { type: 'ok' };
    },
  };
});
