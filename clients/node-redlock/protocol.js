'use strict';
// The lock-harness client protocol (docs/clients.md), for Node programs: JSON lines, one
// hello, then one request at a time on stdin, one answer each on stdout; logs go to stderr.
// stdin's end means the harness is done with us: exit at once.
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const Redis = require('ioredis');

function log(...args) {
  process.stderr.write(`[${process.argv[1].split('/').pop()} ${process.pid}] ${args.join(' ')}\n`);
}

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function message(e) {
  return String((e && e.message) || e).slice(0, 300);
}

// start(hello) -> {describe: {name, version, tokens, features}, acquire(req), release(req), ...}
async function serve(start) {
  const lines = readline.createInterface({ input: process.stdin, terminal: false });
  let client = null;
  for await (const line of lines) {
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      log(`not JSON, ignored: ${line.slice(0, 100)}`);
      continue;
    }
    if (client === null) {
      try {
        client = await start(req);
        send({ type: 'ok', ...client.describe });
      } catch (e) {
        send({ type: 'fail', error: message(e) });
        process.exit(1);
      }
      continue;
    }
    let reply;
    try {
      const op = client[req.op];
      reply = op ? await op(req) : { type: 'info', error: `no op ${req.op}` };
    } catch (e) {
      reply = { type: 'info', error: message(e) }; // we cannot tell what happened
    }
    send({ ...reply, id: req.id });
  }
  process.exit(0);
}

// One ioredis connection to a node (a relay in the harness's client process), failing fast:
// no offline queue, no retried or resent commands (a retried write could apply twice), and a
// command timeout that is small next to the TTL, as Redlock asks.
function connect(node, hello, commandTimeout) {
  const redis = new Redis({
    host: node.host,
    port: node.port,
    connectTimeout: Math.round(hello.op_timeout * 1000),
    commandTimeout,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    retryStrategy: () => 100,
  });
  let last = '';
  redis.on('error', (e) => {
    if (e.message !== last) log(`${node.name}: ${e.message}`);
    last = e.message;
  });
  redis.on('ready', () => { last = ''; });
  return redis;
}

// Wait until every connection is ready, or until `ms` have passed (a node that is down now
// only costs its votes).
function ready(clients, ms) {
  return Promise.all(clients.map((c) => new Promise((resolve) => {
    if (c.status === 'ready') return resolve();
    const timer = setTimeout(resolve, ms);
    c.once('ready', () => { clearTimeout(timer); resolve(); });
  })));
}

// The installed version of an npm package (the run records it).
function version(pkg) {
  return JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', pkg, 'package.json'))).version;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// attempt() until it returns something, or until `timeout` seconds have passed: null then.
async function poll(timeout, attempt, every) {
  const end = Date.now() + timeout * 1000;
  for (;;) {
    const got = await attempt();
    if (got) return got;
    if (Date.now() >= end) return null;
    await sleep(every);
  }
}

// The grants this program holds, by the handle the harness gets for each.
class Handles {
  constructor() { this.next = 0; this.map = new Map(); }
  add(value) { this.next += 1; this.map.set(this.next, value); return this.next; }
  get(handle) { return this.map.get(handle); }
  take(handle) { const value = this.map.get(handle); this.map.delete(handle); return value; }
}

const notHere = (handle) => ({ type: 'info', error: `no lock ${handle} here` });

module.exports = { serve, connect, ready, log, message, version, poll, Handles, notHere };
