'use strict';
// npm's redlock 4 over the DB nodes (independent masters), as its README uses it.
// acquire: lock() with retries for the acquire's timeout; a LockError (no quorum in any
// attempt; each failed attempt unlocked what it took) is a fail. release: unlock(); a
// LockError is a fail when every node answered (too few still had our value: it expired),
// info when some did not (they decide). No fencing tokens: Redlock has none.
const Redlock = require('redlock');
const { serve, connect, ready } = require('./protocol');

const RETRY_DELAY = 100; // ms, redlock's retryDelay; retryJitter half of it

serve(async (hello) => {
  const ttl = Math.round(hello.ttl * 1000);
  const commandTimeout = Math.max(50, Math.round(Math.min(hello.op_timeout, hello.ttl / 10) * 1000));
  const clients = hello.nodes.map((n) => connect(n, hello, commandTimeout));
  await ready(clients, 2000);
  const redlock = new Redlock(clients, { driftFactor: 0.01, retryCount: 0,
                                         retryDelay: RETRY_DELAY, retryJitter: RETRY_DELAY / 2 });
  let errors = 0; // node errors ("clientError"): a count, to tell "no" from "no answer"
  redlock.on('clientError', () => { errors += 1; });
  const resource = `locks:${hello.lock}`;
  const locks = new Map();
  let next = 0;

  async function settle(lock, action) {
    const before = errors;
    try {
      await action();
      return null;
    } catch (e) {
      if (!(e instanceof Redlock.LockError)) throw e;
      return errors === before ? { type: 'fail', error: e.message } : { type: 'info', error: e.message };
    }
  }

  return {
    describe: { name: 'node-redlock', version: require('redlock/package.json').version,
                tokens: false, features: ['extend'] },
    async acquire({ timeout }) {
      const retryCount = Math.max(1, Math.round((timeout * 1000) / RETRY_DELAY));
      let lock;
      try {
        lock = await redlock.lockWithOptions(resource, ttl, { retryCount });
      } catch (e) {
        if (e instanceof Redlock.LockError) return { type: 'fail', error: e.message };
        throw e;
      }
      next += 1;
      locks.set(next, lock);
      return { type: 'ok', validity: (lock.expiration - Date.now()) / 1000, handle: next };
    },
    async release({ handle }) {
      const lock = locks.get(handle);
      if (!lock) return { type: 'info', error: `no lock ${handle} here` };
      locks.delete(handle);
      return (await settle(lock, () => lock.unlock())) || { type: 'ok' };
    },
    async extend({ handle, ttl: seconds }) {
      const lock = locks.get(handle);
      if (!lock) return { type: 'info', error: `no lock ${handle} here` };
      const failed = await settle(lock, () => lock.extend(Math.round(seconds * 1000)));
      return failed || { type: 'ok', validity: (lock.expiration - Date.now()) / 1000 };
    },
  };
});
