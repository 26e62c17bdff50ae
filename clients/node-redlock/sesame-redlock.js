'use strict';
// npm's @sesamecare-oss/redlock (the maintained Redlock port) as its README leads: using(),
// which extends the lock automatically while the routine runs and aborts its signal when an
// extension fails. Default settings but retryCount, which spans the acquire's timeout.
// acquire: the routine has started (it then waits for the release). held: the signal is not
// aborted. release: the routine ends and using() releases; a release error is a fail when
// every node answered, info when some did not. No fencing tokens.
const { Redlock, ExecutionError, ResourceLockedError } = require('@sesamecare-oss/redlock');
const { serve, connect, ready, version, Handles, notHere } = require('./protocol');

const RETRY_DELAY = 200; // ms, the library's default retryDelay

serve(async (hello) => {
  const ttl = Math.round(hello.ttl * 1000);
  const commandTimeout = Math.max(50, Math.round(Math.min(hello.op_timeout, hello.ttl / 10) * 1000));
  const clients = hello.nodes.map((n) => connect(n, hello, commandTimeout));
  await ready(clients, 2000);
  const redlock = new Redlock(clients);
  let errors = 0; // node errors, not "locked by another": a count, to tell "no" from "no answer"
  redlock.on('error', (e) => { if (!(e instanceof ResourceLockedError)) errors += 1; });
  const resource = `locks:${hello.lock}`;
  const grants = new Handles();

  return {
    describe: { name: 'sesame-redlock', version: version('@sesamecare-oss/redlock'),
                tokens: false, features: ['held'] },
    acquire({ timeout }) {
      const retryCount = Math.max(1, Math.round((timeout * 1000) / RETRY_DELAY));
      return new Promise((resolve, reject) => {
        const grant = { errors };
        grant.done = redlock.using([resource], ttl, { retryCount }, (signal, context) =>
          new Promise((finish) => {
            Object.assign(grant, { signal, finish });
            resolve({ type: 'ok', validity: (context.lock.expiration - Date.now()) / 1000,
                      handle: grants.add(grant) });
          }));
        grant.done.catch((e) => {
          if (grant.finish) return; // after the grant: release() reads it
          if (e instanceof ExecutionError) resolve({ type: 'fail', error: e.message });
          else reject(e);
        });
      });
    },
    async release({ handle }) {
      const grant = grants.take(handle);
      if (!grant) return notHere(handle);
      const lost = grant.signal.aborted;
      const before = errors;
      grant.finish();
      try {
        await grant.done;
      } catch (e) {
        if (!(e instanceof ExecutionError)) throw e;
        return { type: errors === before ? 'fail' : 'info', error: e.message };
      }
      return lost ? { type: 'fail', error: `lost: ${grant.signal.error}` } : { type: 'ok' };
    },
    async held({ handle }) {
      const grant = grants.get(handle);
      return { type: 'ok', held: !!grant && !grant.signal.aborted };
    },
  };
});
