// Takedown lists: what answers 451 everywhere. Kept in Redis (shared by every node), changed only through
// apply() (the admin API, the CLI, watched files, polled lists), read by each node into memory.
import os from 'node:os';
import { LRUCache } from 'lru-cache';
import { HttpError } from './errors.js';
import { isAccountName } from './account-name.js';
import { isUploadKey, resolveSource } from './sources.js';
import { subscribe } from './redis.js';

export const TAKEDOWN_KINDS = /** @type {const} */ (['key', 'url', 'domain', 'pattern', 'account']);
/** @typedef {typeof TAKEDOWN_KINDS[number]} TakedownKind */
/** @typedef {{ kind: TakedownKind, value: string }} TakedownEntry */

/** Pub/sub channel: the list changed (the message is its new version). */
export const TAKEDOWN_CHANNEL = 'takedown:changed';
/** Pub/sub channel: the origins drop these taken-down sources from their own caches (JSON {sources: {id: paths}}). */
export const TAKEDOWN_EVICT_CHANNEL = 'takedown:evict';
export const TAKEDOWN_KEYS = {
  /** hash: "<kind>\t<value>" → how many sources (admin, a file, a list URL) block it */
  all: 'takedown:all',
  /** hash: "<kind>\t<value>" → JSON of who blocked it, when and why */
  meta: 'takedown:meta',
  /** a counter: +1 on every change of `all` */
  version: 'takedown:version',
  /** hash: node → "<version> <ms>": the list each node has in memory (the purge waits for every live node) */
  seen: 'takedown:seen',
  /** stream: every block and unblock */
  audit: 'takedown:audit',
  /** set: one source's entries. @param {string} source */
  source: (source) => `takedown:source:${source}`,
  /** hash: upload key → the account that uploaded it */
  owners: 'upload:owner',
  /** set: an account's upload keys. @param {string} account */
  uploads: (account) => `upload:account:${account}`,
};

const MAX_PATTERN = 500;
const HOST = /^(?=.{1,253}$)[a-z0-9-_]+(\.[a-z0-9-_]+)*$/;

/** @param {string} reason @param {Record<string, unknown>} [info] */
const invalid = (reason, info = {}) => new HttpError(400, 'invalid_takedown', { reason, ...info });

/**
 * The one matching form of a source URL: host (lowercase, port kept) and path. Scheme, query and fragment do
 * not count: one image is one entry however it is asked for. @param {URL} url
 */
export function urlIdentity(url) {
  return `${url.host}${url.pathname}`;
}

/**
 * An entry as the list keeps it, or a JSON 400: a URL (ours or a proxy's unwrapped) that names one of our
 * uploads becomes a key entry, a domain is its lowercase host ("*.example.com" and a URL are accepted), a
 * pattern must compile, an account is a Hive name ("@" allowed).
 * @param {string} kind @param {unknown} given @param {import('./sources.js').UnwrapOptions} unwrap
 * @returns {TakedownEntry}
 */
export function parseEntry(kind, given, unwrap) {
  if (!TAKEDOWN_KINDS.includes(/** @type {any} */ (kind)))
    throw invalid('unknown kind', { kind: String(kind).slice(0, 20), allowed: TAKEDOWN_KINDS });
  if (typeof given !== 'string' || !given.trim() || given.length > 4096)
    throw invalid('a value is a non-empty string of at most 4096 characters', { kind });
  const value = given.trim();
  if (kind === 'key') {
    if (!isUploadKey(value)) throw invalid('not an upload key', { kind });
    return { kind, value };
  }
  if (kind === 'url') {
    let source;
    try {
      source = resolveSource(value, unwrap);
    } catch {
      throw invalid('not an http(s) URL', { kind });
    }
    if (source.uploadKey) return { kind: 'key', value: source.uploadKey };
    return { kind, value: urlIdentity(new URL(/** @type {string} */ (source.url))) };
  }
  if (kind === 'domain') {
    let host = value.toLowerCase().replace(/^\*?\./, '');
    try {
      host = new URL(/^https?:\/\//.test(host) ? host : `http://${host}`).hostname;
    } catch {
      throw invalid('not a domain', { kind });
    }
    if (!HOST.test(host)) throw invalid('not a domain', { kind });
    return { kind, value: host };
  }
  if (kind === 'pattern') {
    if (value.length > MAX_PATTERN) throw invalid(`a pattern is at most ${MAX_PATTERN} characters`, { kind });
    try {
      new RegExp(value); // eslint-disable-line no-new
    } catch (err) {
      throw invalid('not a regular expression', { kind, error: /** @type {Error} */ (err).message.slice(0, 200) });
    }
    return { kind, value };
  }
  const account = value.replace(/^@/, '');
  if (!isAccountName(account)) throw invalid('not a Hive account name', { kind });
  return { kind: 'account', value: account };
}

/** @param {TakedownEntry} entry */
export const entryField = (entry) => `${entry.kind}\t${entry.value}`;

/** @param {string} field @returns {TakedownEntry} */
export function entryOf(field) {
  const tab = field.indexOf('\t');
  return { kind: /** @type {TakedownKind} */ (field.slice(0, tab)), value: field.slice(tab + 1) };
}

/**
 * What a node has in memory: sets to look up, patterns compiled.
 * @param {string[]} fields
 */
export function compileList(fields) {
  /** @type {Record<string, Set<string>>} */
  const sets = { key: new Set(), url: new Set(), domain: new Set(), account: new Set() };
  /** @type {{ value: string, regex: RegExp }[]} */
  const patterns = [];
  for (const field of fields) {
    const { kind, value } = entryOf(field);
    if (kind === 'pattern') {
      try {
        patterns.push({ value, regex: new RegExp(value) });
      } catch {
        // refused on the way in: only a hand-made Redis entry gets here
      }
    } else sets[kind]?.add(value);
  }
  /** @param {string} host */
  const blockedHost = (host) => {
    for (let at = host; at; at = at.includes('.') ? at.slice(at.indexOf('.') + 1) : '') {
      if (sets.domain.has(at)) return at;
    }
    return null;
  };
  return {
    size: fields.length,
    accounts: sets.account.size,
    /**
     * The entry that blocks an image source, or null. @param {{ url?: string, uploadKey?: string }} source
     * @returns {TakedownEntry | null}
     */
    source(source) {
      if (source.uploadKey) return sets.key.has(source.uploadKey) ? { kind: 'key', value: source.uploadKey } : null;
      if (!source.url) return null;
      const url = new URL(source.url);
      const identity = urlIdentity(url);
      if (sets.url.has(identity)) return { kind: 'url', value: identity };
      const domain = blockedHost(url.hostname);
      if (domain) return { kind: 'domain', value: domain };
      const pattern = patterns.find(({ regex }) => regex.test(source.url || ''));
      return pattern ? { kind: 'pattern', value: pattern.value } : null;
    },
    /** @param {string} account @returns {TakedownEntry | null} */
    account(account) {
      return sets.account.has(account) ? { kind: 'account', value: account } : null;
    },
  };
}

/**
 * This node's copy of the list: loaded at start, reloaded on every change notice and checked every
 * `pollMs` (a notice lost while Redis reconnected), with the version it holds written to `takedown:seen`
 * so a purge can wait until every live node enforces a new block. Redis down: the last list stays in force.
 * @param {{ redis: import('ioredis').Redis, logger: import('pino').Logger, service: string, pollMs: number }} options
 */
export function createTakedownList({ redis, logger, service, pollMs }) {
  const node = `${service}:${os.hostname()}:${process.pid}`;
  let list = compileList([]);
  let version = -1;
  /** @type {Promise<void> | null} */
  let loading = null;
  const subscriber = subscribe(redis, TAKEDOWN_CHANNEL, () => reload());

  async function load() {
    // the poll reads one counter; the list only when it moved (a change landing between the two reads is
    // read now and reported as the older version: the next poll loads it again)
    const next = Number(await redis.get(TAKEDOWN_KEYS.version)) || 0;
    if (next !== version) {
      list = compileList(await redis.hkeys(TAKEDOWN_KEYS.all));
      if (version !== -1) logger.info({ version: next, entries: list.size }, 'takedown list reloaded');
      version = next;
    }
    await redis.hset(TAKEDOWN_KEYS.seen, node, `${version} ${Date.now()}`);
  }
  let again = false;
  /** @returns {Promise<void>} */
  function reload() {
    if (loading) {
      again = true; // a change may have landed after the running load read the list
      return loading;
    }
    loading = load()
      .catch((err) => logger.warn({ err: err.message }, 'takedown list not reloaded'))
      .finally(() => {
        loading = null;
        if (again) {
          again = false;
          reload();
        }
      });
    return loading;
  }
  const timer = setInterval(reload, pollMs);
  timer.unref();
  return {
    /** loaded once (or Redis did not answer) */
    ready: reload(),
    get current() {
      return list;
    },
    get version() {
      return version;
    },
    async close() {
      clearInterval(timer);
      subscriber.disconnect();
      await redis.hdel(TAKEDOWN_KEYS.seen, node).catch(() => {});
    },
  };
}
/** @typedef {ReturnType<typeof createTakedownList>} TakedownList */

/** A 451 in the one JSON shape, with the short lifetime that lets an unblock show. @param {string} cacheControl @param {Record<string, string>} [headers] */
export function takedownError(cacheControl, headers = {}) {
  return new HttpError(
    451,
    'unavailable_for_legal_reasons',
    { reason: 'taken down' },
    { ...headers, 'Cache-Control': cacheControl },
  );
}

// Remembers (bounded) which sources this fleet has served and under which paths: a takedown then knows the
// variant URLs to purge at the CDN, and the sources a domain or a pattern covers. The oldest sources leave
// first once there are more than `max`; a source keeps its `perSource` most recently served paths (a sorted
// set by time: junk spellings asked once age out under the real ones, asked again and again).
// With ARGV[6] = "known" only a source already remembered gets a path (a legacy URL costs its asker nothing,
// so it must not push real sources out).
const RECORD = `if ARGV[6] == 'known' and not redis.call('ZSCORE', KEYS[1], ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
local paths = KEYS[3] .. ARGV[2]
if redis.call('TYPE', paths).ok == 'set' then redis.call('DEL', paths) end
for i = 7, #ARGV do redis.call('ZADD', paths, ARGV[1], ARGV[i]) end
redis.call('ZREMRANGEBYRANK', paths, 0, -tonumber(ARGV[5]) - 1)
if redis.call('ZCARD', KEYS[1]) > tonumber(ARGV[4]) then
  local old = redis.call('ZRANGE', KEYS[1], 0, 99)
  for _, id in ipairs(old) do
    redis.call('HDEL', KEYS[2], id)
    redis.call('DEL', KEYS[3] .. id)
    redis.call('ZREM', KEYS[1], id)
  end
end
return 1`;

export const SERVED_KEYS = {
  recent: 'takedown:served',
  sources: 'takedown:served:source',
  paths: 'takedown:served:paths:',
};

/**
 * The log of served sources (see RECORD) that takedowns read: the origin writes every image answer, the
 * resolver every avatar redirect under the image it points to.
 * @param {{ redis: import('ioredis').Redis, logger: import('pino').Logger, max: number, perSource: number }} options
 */
export function createServedLog({ redis, logger, max, perSource }) {
  // a path recorded in the last minute is not sent again; served again after that, its time is renewed
  const recorded = new LRUCache({ max: 20000, ttl: 60_000 });
  return {
    /**
     * Remembers that `source` was answered under these paths (the origin's and the client's spelling).
     * Never waits and never fails a request. @param {import('./sources.js').Source} source
     * @param {(string | undefined)[]} paths @param {boolean} [onlyKnown] only for a source remembered already
     */
    served(source, paths, onlyKnown = false) {
      const fresh = /** @type {string[]} */ (
        [...new Set(paths)].filter((path) => path && path.length < 2048 && !recorded.has(`${source.id} ${path}`))
      );
      if (!fresh.length) return;
      for (const path of fresh) recorded.set(`${source.id} ${path}`, true);
      redis
        .eval(
          RECORD,
          3,
          SERVED_KEYS.recent,
          SERVED_KEYS.sources,
          SERVED_KEYS.paths,
          Date.now(),
          source.id,
          source.url || '',
          max,
          perSource,
          onlyKnown ? 'known' : 'any',
          ...fresh,
        )
        .catch((/** @type {Error} */ err) => {
          for (const path of fresh) recorded.delete(`${source.id} ${path}`);
          logger.debug({ err: err.message }, 'served paths not recorded');
        });
    },
  };
}
/** @typedef {ReturnType<typeof createServedLog>} ServedLog */
