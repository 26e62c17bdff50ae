'use strict';
// npm's dynamodb-lock-client as its README uses it: a FailOpen client on aws-sdk's
// DocumentClient (the lease ends leaseDurationMs after the last heartbeat; heartbeats every
// 0.3 x the lease, the README's ratio), acquireLock(id) and lock.release(). A held lock makes
// the acquire wait one lease and take it over if it was not renewed (retryCount: the
// default, 1). Token: the lock's fencingToken. held: no heartbeat failed ('error'). Its
// release answers success also when another process has taken the lock over (the library
// swallows that condition failure): the answer is the library's word, taken as given.
// The table (the harness's, one string hash key) is made here unless it exists.
const AWS = require('aws-sdk');
const DynamoDBLockClient = require('dynamodb-lock-client');
const { serve, version, Handles, notHere, log, message } = require('./protocol');

const TABLE = 'lock_harness_locks';
const KEY = 'lockKey';

serve(async (hello) => {
  const { host, port } = hello.nodes[0];
  const options = { endpoint: `http://${host}:${port}`, region: 'us-east-1',
                    credentials: { accessKeyId: 'lock-harness', secretAccessKey: 'lock-harness' } };
  try {
    await new AWS.DynamoDB(options).createTable({
      TableName: TABLE, BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: KEY, KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: KEY, AttributeType: 'S' }],
    }).promise();
  } catch (e) {
    if (e.code !== 'ResourceInUseException') throw e;
  }
  const ttl = Math.round(hello.ttl * 1000);
  const client = new DynamoDBLockClient.FailOpen({
    dynamodb: new AWS.DynamoDB.DocumentClient(options), lockTable: TABLE, partitionKey: KEY,
    heartbeatPeriodMs: Math.round(ttl * 0.3), leaseDurationMs: ttl,
  });
  const grants = new Handles();
  return {
    describe: { name: 'dynamodb-lock-client', version: version('dynamodb-lock-client'),
                tokens: true, features: ['held'] },
    acquire() {
      return new Promise((resolve) => client.acquireLock(hello.lock, (e, lock) => {
        if (e) {
          resolve({ type: e.code === 'FailedToAcquireLock' ? 'fail' : 'info', error: message(e) });
          return;
        }
        const grant = { lock, lost: false };
        lock.on('error', (err) => { grant.lost = true; log(`heartbeat failed: ${message(err)}`); });
        resolve({ type: 'ok', token: lock.fencingToken, validity: hello.ttl,
                  handle: grants.add(grant) });
      }));
    },
    release({ handle }) {
      const grant = grants.take(handle);
      if (!grant) return notHere(handle);
      return new Promise((resolve) => grant.lock.release((e) => {
        if (!e) resolve({ type: 'ok' });
        else resolve({ type: e.code === 'FailedToReleaseLock' ? 'fail' : 'info', error: message(e) });
      }));
    },
    async held({ handle }) {
      const grant = grants.get(handle);
      return { type: 'ok', held: !!grant && !grant.lost };
    },
  };
});
