'use strict';
// npm's redis-semaphore Mutex on one Redis (node 1), as its README uses it: SET NX PX, a
// timer refreshing the TTL every 0.8 x TTL while held, release by compare-and-delete.
// onLockLost (the refresh found the key gone) marks the lock lost: held() says no and
// release() is a fail. (The library's default onLockLost throws, which kills the process.)
const { Mutex, TimeoutError } = require('redis-semaphore');
const { serve, connect, ready, log } = require('./protocol');

serve(async (hello) => {
  const ttl = Math.round(hello.ttl * 1000);
  const client = connect(hello.nodes[0], hello, Math.round(hello.op_timeout * 1000));
  await ready([client], 2000);
  const mutexes = new Map();
  let next = 0;

  return {
    describe: { name: 'redis-semaphore', version: require('redis-semaphore/package.json').version,
                tokens: false, features: ['held'] },
    async acquire({ timeout }) {
      const entry = { lost: false };
      entry.mutex = new Mutex(client, hello.lock, {
        lockTimeout: ttl,
        acquireTimeout: Math.round(timeout * 1000),
        retryInterval: 10,
        onLockLost: (e) => { entry.lost = true; log(e.message); },
      });
      try {
        await entry.mutex.acquire();
      } catch (e) {
        if (e instanceof TimeoutError) return { type: 'fail', error: e.message };
        throw e;
      }
      next += 1;
      mutexes.set(next, entry);
      return { type: 'ok', validity: hello.ttl, handle: next };
    },
    async release({ handle }) {
      const entry = mutexes.get(handle);
      if (!entry) return { type: 'info', error: `no lock ${handle} here` };
      mutexes.delete(handle);
      const lost = entry.lost || !entry.mutex.isAcquired;
      await entry.mutex.release();
      return lost ? { type: 'fail', error: 'lost: a refresh found the key gone' } : { type: 'ok' };
    },
    async held({ handle }) {
      const entry = mutexes.get(handle);
      return { type: 'ok', held: !!entry && !entry.lost && entry.mutex.isAcquired };
    },
  };
});
