// A load generator in its own process, so that what it measures is not delayed by another generator's event
// loop: `open` sends requests at a fixed rate whatever the answers (the flood), `probe` sends one request
// at a time with a pause between them (a user on the fast path), `mix` replays a prepared list of requests
// (GETs and uploads, each with a class) at a fixed rate. Started by runChild(): the spec on stdin, one JSON
// line on stdout.
import '../lib/src/node-version.js';
import { spawn } from 'node:child_process';
import { Pool } from 'undici';

/**
 * @typedef {{ mode: 'open', base: string, templates: string[], rate: number, seconds: number, first: number, span: number }} OpenSpec
 *   request i goes to templates[i % length] with {n} replaced by first + (i % span)
 * @typedef {{ mode: 'probe', base: string, paths: Record<string, string>, seconds: number, pauseMs: number, skipMs?: number }} ProbeSpec
 *   answers to requests sent in the first skipMs are not recorded (a warm-up)
 * @typedef {{ path: string, kind: string, upload?: number, accept?: string }} MixRequest upload: index of the body to
 *   POST; accept: this request's Accept (else the spec's)
 * @typedef {{ mode: 'mix', base: string, requests: MixRequest[], uploads: string[], token: string, rate: number, accept: string }} MixSpec
 *   uploads: base64 bodies
 * @typedef {{ status: number, ms: number, at: number, reason?: string, retryAfter?: string, type?: string, cache?: string }} Answer
 *   at: sent, ms since the generator started; type: Content-Type; cache: varnish's X-Cache
 */

const STARTED = performance.now();

/**
 * @param {Pool} pool @param {string} path
 * @param {{ method?: 'GET' | 'POST', headers?: Record<string, string>, body?: Buffer }} [init]
 * @returns {Promise<Answer>}
 */
async function send(pool, path, init = {}) {
  const sent = performance.now();
  const response = await pool.request({ method: init.method || 'GET', path, headers: init.headers, body: init.body });
  const text = response.statusCode >= 400 ? await response.body.text() : (await response.body.dump(), '');
  const ms = performance.now() - sent;
  let reason;
  try {
    const error = text ? JSON.parse(text).error : undefined;
    reason = error?.info?.reason ?? error?.name;
  } catch {
    reason = 'not json';
  }
  const header = (/** @type {string} */ name) => /** @type {string | undefined} */ (response.headers[name]);
  return {
    status: response.statusCode,
    ms,
    at: Math.round(sent - STARTED),
    reason,
    retryAfter: header('retry-after'),
    type: header('content-type'),
    cache: header('x-cache'),
  };
}

/**
 * Starts request i at i / rate seconds whatever the answers (open loop), until `done(i)`; resolves with
 * every answer in order.
 * @template T @param {number} rate @param {(i: number, elapsedMs: number) => boolean} done @param {(i: number) => Promise<T>} start
 * @returns {Promise<T[]>}
 */
async function paced(rate, done, start) {
  /** @type {Promise<T>[]} */
  const inFlight = [];
  const started = performance.now();
  for (;;) {
    const elapsedMs = performance.now() - started;
    const due = Math.floor((elapsedMs / 1000) * rate);
    let i = inFlight.length;
    for (; i < due && !done(i, elapsedMs); i += 1) inFlight.push(start(i));
    if (done(i, elapsedMs)) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Promise.all(inFlight);
}

/** @param {OpenSpec} spec */
async function open(spec) {
  const pool = new Pool(spec.base, { connections: 512 });
  const answers = await paced(
    spec.rate,
    (_i, elapsedMs) => elapsedMs >= spec.seconds * 1000,
    (i) => send(pool, spec.templates[i % spec.templates.length].replace('{n}', String(spec.first + (i % spec.span)))),
  );
  await pool.close();
  return answers;
}

/** @param {ProbeSpec} spec */
async function probe(spec) {
  const pool = new Pool(spec.base, { connections: 1 });
  /** @type {Record<string, number[]>} */
  const latencies = Object.fromEntries(Object.keys(spec.paths).map((name) => [name, []]));
  const started = performance.now();
  // answers carry `at` from the generator's start: the warm-up ends skipMs after this probe's start
  const recordFrom = started - STARTED + (spec.skipMs || 0);
  while (performance.now() - started < spec.seconds * 1000) {
    for (const [name, path] of Object.entries(spec.paths)) {
      const answer = await send(pool, path);
      if (answer.status >= 400) throw new Error(`${name} answered ${answer.status}`);
      if (answer.at >= recordFrom) latencies[name].push(answer.ms);
    }
    await new Promise((resolve) => setTimeout(resolve, spec.pauseMs));
  }
  await pool.close();
  return latencies;
}

/** @param {Buffer} body @param {string} token */
function multipart(body, token) {
  const boundary = `----bench${Math.random().toString(16).slice(2)}`;
  const data = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="image_file"; filename="upload.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`,
    ),
    body,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return {
    method: /** @type {const} */ ('POST'),
    body: data,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': `multipart/form-data; boundary=${boundary}`,
      'content-length': String(data.length),
    },
  };
}

/** @param {MixSpec} spec @returns {Promise<Record<string, { ms: number[], statuses: Record<string, number>, hits: number }>>} */
async function mix(spec) {
  const pool = new Pool(spec.base, { connections: 256 });
  const uploads = spec.uploads.map((body) => Buffer.from(body, 'base64'));
  /** @type {Record<string, { ms: number[], statuses: Record<string, number>, hits: number }>} */
  const byKind = {};
  const record = (/** @type {string} */ kind, /** @type {Answer} */ answer) => {
    const entry = (byKind[kind] ||= { ms: [], statuses: {}, hits: 0 });
    entry.ms.push(answer.ms);
    entry.statuses[answer.status] = (entry.statuses[answer.status] || 0) + 1;
    if (answer.cache === 'HIT') entry.hits += 1;
  };
  await paced(
    spec.rate,
    (i) => i >= spec.requests.length,
    (i) => {
      const request = spec.requests[i];
      const init =
        request.upload === undefined
          ? { headers: { accept: request.accept ?? spec.accept } }
          : multipart(uploads[request.upload], spec.token);
      return send(pool, request.path, init).then((answer) => {
        record(request.kind, answer);
        // an image varnish did not have, by the format it was answered in (or the status)
        if (request.kind === 'image' && answer.cache !== 'HIT') {
          record(`image miss, ${answer.status === 200 ? answer.type?.replace('image/', '') : answer.status}`, answer);
          record('image miss, all', answer);
        }
      });
    },
  );
  await pool.close();
  return byKind;
}

/**
 * Runs a generator in a child process and resolves with what it measured.
 * @template {OpenSpec | ProbeSpec | MixSpec} S
 * @param {S} spec
 * @returns {Promise<S extends OpenSpec ? Answer[] : S extends ProbeSpec ? Record<string, number[]> : Record<string, { ms: number[], statuses: Record<string, number>, hits: number }>>}
 */
export function runChild(spec) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [import.meta.filename], { stdio: ['pipe', 'pipe', 'inherit'] });
    child.stdin.end(JSON.stringify(spec));
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(output)) : reject(new Error(`load generator exited with ${code}`)),
    );
  });
}

if (import.meta.main) {
  let input = '';
  for await (const chunk of process.stdin) input += chunk;
  const spec = /** @type {OpenSpec | ProbeSpec | MixSpec} */ (JSON.parse(input));
  const result = spec.mode === 'open' ? await open(spec) : spec.mode === 'probe' ? await probe(spec) : await mix(spec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
