// origin-backfill KEYS_FILE [--concurrency N] [--origin URL] [--retry]: the uploads a list names (upload keys
// or their URLs on any host, one per line, from the chain or the old host's logs) pulled through ahead of their
// first request, by asking the running origin for each (HEAD /<key>/backfill): the same path as a visitor's
// request (UPSTREAM_IMAGE_HOSTS in turn, every limit, the key checked, the takedown list). Each key's outcome is
// appended to KEYS_FILE.progress as it lands, so a run cut short is resumed by running it again and a finished
// list fetches nothing; --retry asks again for those that were missing or mismatched upstream.
// `./infra/stack backfill KEYS_FILE` runs it against the stack's origin.
import '../../../lib/src/node-version.js';
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { Agent, fetch } from 'undici';
import { isUploadKey, loadConfig } from '@stack/lib';
import { runBatch } from './batch.js';
import { settings } from '../config.js';

/** @typedef {'stored' | 'present' | 'mismatched' | 'missing' | 'blocked' | 'failed'} Outcome */

/** What a key can come to; a later run does not ask again for a key that came to one (with --retry: but missing and mismatched). */
const OUTCOMES = ['stored', 'present', 'mismatched', 'missing', 'blocked'];

/**
 * The upload keys a list names, each once, in order: bare keys, or URLs whose first path segment is one
 * (https://images.hive.blog/DQm…/photo.jpg). Blank lines and # comments are skipped; the rest is refused.
 * @param {string} text @returns {{ keys: string[], refused: string[] }}
 */
export function keysOf(text) {
  const keys = new Set();
  const refused = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    let key = line;
    if (/^https?:\/\//i.test(line)) {
      try {
        key = new URL(line).pathname.split('/')[1] || '';
      } catch {
        key = '';
      }
    }
    if (isUploadKey(key)) keys.add(key);
    else refused.push(line.slice(0, 200));
  }
  return { keys: [...keys], refused };
}

/** The outcomes a progress file holds, by key (the last line of a key wins). @param {string} file @returns {Map<string, string>} */
export function readProgress(file) {
  /** @type {Map<string, string>} */
  const done = new Map();
  if (!fs.existsSync(file)) return done;
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const [key, outcome] = line.split('\t');
    if (key && outcome) done.set(key, outcome);
  }
  return done;
}

/**
 * One key asked of the origin; a 503 (an upstream busy or failing) is asked again twice, a second apart.
 * @param {string} origin @param {string} key @param {Agent | undefined} dispatcher the origin's socket's
 * @returns {Promise<Outcome>}
 */
async function askOrigin(origin, key, dispatcher) {
  for (let attempt = 0; ; attempt += 1) {
    // Accept: HEIC, so that a HEIC original is not converted to JPEG for an answer nobody reads
    const response = await fetch(`${origin}/${key}/backfill`, {
      method: 'HEAD',
      headers: { accept: 'image/heic,*/*' },
      signal: AbortSignal.timeout(120_000),
      ...(dispatcher ? { dispatcher } : {}),
    });
    if (response.status === 200) return response.headers.get('x-pulled-from') ? 'stored' : 'present';
    if (response.status === 404) return 'missing';
    if (response.status === 502) return 'mismatched';
    if (response.status === 451) return 'blocked';
    if (response.status !== 503 || attempt >= 2) throw new Error(`the origin answered ${response.status}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

/**
 * Every key of `file` not done before through askOrigin, `concurrency` at a time, each outcome appended to
 * the progress file; `socketPath`: the origin's Unix socket (INTERNAL_SOCKETS), `origin` then only names it.
 * @param {{ file: string, origin: string, socketPath?: string, concurrency: number, retry?: boolean, log?: (line: string) => void }} options
 * @returns {Promise<Record<string, number>>} a count per outcome, and total, doneBefore, refused (lines not a key)
 */
export async function backfill({ file, origin, socketPath, concurrency, retry = false, log }) {
  const dispatcher = socketPath ? new Agent({ connect: { socketPath } }) : undefined;
  const { keys, refused } = keysOf(fs.readFileSync(file, 'utf8'));
  const progressFile = `${file}.progress`;
  const done = readProgress(progressFile);
  const final = retry ? ['stored', 'present', 'blocked'] : OUTCOMES;
  const todo = keys.filter((key) => !final.includes(/** @type {string} */ (done.get(key))));
  const progress = fs.openSync(progressFile, 'a', 0o600);
  try {
    const counts = await runBatch({
      items: todo,
      concurrency,
      outcomes: OUTCOMES,
      name: (key) => key,
      log,
      async work(key) {
        const outcome = await askOrigin(origin, key, dispatcher);
        fs.appendFileSync(progress, `${key}\t${outcome}\n`);
        return outcome;
      },
    });
    return { ...counts, total: keys.length, doneBefore: keys.length - todo.length, refused: refused.length };
  } finally {
    fs.closeSync(progress);
  }
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      concurrency: { type: 'string', default: '4' },
      origin: { type: 'string' },
      retry: { type: 'boolean', default: false },
    },
  });
  if (positionals.length !== 1) throw new Error('usage: backfill KEYS_FILE [--concurrency N] [--origin URL] [--retry]');
  const config = loadConfig(settings);
  if (!values.origin && !config.UPSTREAM_IMAGE_HOSTS.length)
    throw new Error('UPSTREAM_IMAGE_HOSTS is empty: the origin has no image host to pull from');
  const host = config.ORIGIN_HOST === '0.0.0.0' ? '127.0.0.1' : config.ORIGIN_HOST;
  // the stack's origin on its socket (INTERNAL_SOCKETS) or its port, unless --origin names another
  const socketPath = values.origin ? '' : config.ORIGIN_SOCKET;
  const origin = (values.origin || (socketPath ? 'http://origin' : `http://${host}:${config.ORIGIN_PORT}`)).replace(
    /\/+$/,
    '',
  );
  process.stderr.write(
    `backfilling the keys of ${positionals[0]} through ${socketPath || origin} (progress in ${positionals[0]}.progress)\n`,
  );
  const result = await backfill({
    file: positionals[0],
    origin,
    socketPath,
    concurrency: Number(values.concurrency),
    retry: values.retry,
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.stderr.write(
    `${result.total} keys: ${result.stored} stored, ${result.present} already present, ${result.mismatched} mismatched upstream (refused), ` +
      `${result.missing} missing upstream, ${result.blocked} blocked, ${result.failed} failed (run again), ${result.doneBefore} done before; ${result.refused} lines not a key\n`,
  );
  process.exitCode = result.failed ? 1 : 0;
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`backfill: ${err.message}\n`);
    process.exit(2);
  });
}
