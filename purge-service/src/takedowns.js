// Writing the takedown lists: one Lua script changes a source's entries, counts each entry's sources, and
// for every entry that became blocked or unblocked queues a purge event and an audit record, in one step:
// an answered change is on Redis' disk with its purge (appendfsync always), and never half done.
import {
  TAKEDOWN_CHANNEL,
  TAKEDOWN_KEYS,
  HttpError,
  awaitReplicas,
  entryField,
  entryOf,
  parseEntry,
  unwrapOptions,
} from '@stack/lib';

const APPLY = `local mode, source, by, reason, reference, now, auditMax = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local changes = {}
local function audit(action, entry, effective)
  local tab = string.find(entry, '\\t', 1, true)
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', auditMax, '*', 'action', action, 'kind', string.sub(entry, 1, tab - 1),
    'value', string.sub(entry, tab + 1), 'source', source, 'by', by, 'reason', reason, 'reference', reference, 'at', now,
    'effective', effective)
end
local function block(entry)
  if redis.call('SADD', KEYS[1], entry) == 0 then return end
  local count = redis.call('HINCRBY', KEYS[2], entry, 1)
  if count == 1 then
    redis.call('HSET', KEYS[3], entry, cjson.encode({ source = source, by = by, reason = reason, reference = reference, at = now }))
    table.insert(changes, { 'block', entry })
  end
  audit('block', entry, count == 1 and '1' or '0')
end
local function unblock(entry)
  if redis.call('SREM', KEYS[1], entry) == 0 then return end
  local count = redis.call('HINCRBY', KEYS[2], entry, -1)
  if count <= 0 then
    redis.call('HDEL', KEYS[2], entry)
    redis.call('HDEL', KEYS[3], entry)
    table.insert(changes, { 'unblock', entry })
  end
  audit('unblock', entry, count <= 0 and '1' or '0')
end
if mode == 'replace' then
  local wanted = {}
  for i = 8, #ARGV do wanted[ARGV[i]] = true end
  for _, entry in ipairs(redis.call('SMEMBERS', KEYS[1])) do
    if not wanted[entry] then unblock(entry) end
  end
end
for i = 8, #ARGV do
  if mode == 'remove' then unblock(ARGV[i]) else block(ARGV[i]) end
end
local version = tonumber(redis.call('GET', KEYS[4]) or '0')
if #changes > 0 then
  version = redis.call('INCR', KEYS[4])
  for _, change in ipairs(changes) do
    local entry = change[2]
    local tab = string.find(entry, '\\t', 1, true)
    redis.call('XADD', KEYS[5], '*', 'type', 'takedown', 'action', change[1], 'kind', string.sub(entry, 1, tab - 1),
      'value', string.sub(entry, tab + 1), 'version', version, 'source', source, 'at', now)
  end
  redis.call('PUBLISH', '${TAKEDOWN_CHANNEL}', version)
end
local flat = { tostring(version) }
for _, change in ipairs(changes) do
  table.insert(flat, change[1])
  table.insert(flat, change[2])
end
return flat`;

/** Fields of the lists documents (files, polled URLs): ecency's `images`/`accounts`/`domains` and ours. */
const DOCUMENT_FIELDS = /** @type {const} */ ([
  ['keys', 'key'],
  ['images', 'url'],
  ['urls', 'url'],
  ['domains', 'domain'],
  ['patterns', 'pattern'],
  ['accounts', 'account'],
]);

/**
 * Entries from a lists document: `{"images": [...], "accounts": [...], "domains": [...], "keys": [...],
 * "patterns": [...], "urls": [...]}` (ecency's shape is a subset). An entry that does not parse is left out
 * and counted in `refused`; a document that is not such an object is an error.
 * @param {unknown} document @param {import('@stack/lib/src/sources.js').UnwrapOptions} unwrap
 */
export function entriesOfDocument(document, unwrap) {
  if (!document || typeof document !== 'object' || Array.isArray(document))
    throw new Error('a lists document is a JSON object');
  /** @type {import('@stack/lib/src/takedowns.js').TakedownEntry[]} */
  const entries = [];
  let refused = 0;
  for (const [field, kind] of DOCUMENT_FIELDS) {
    const values = /** @type {Record<string, unknown>} */ (document)[field];
    if (values === undefined) continue;
    if (!Array.isArray(values)) throw new Error(`"${field}" must be an array`);
    for (const value of values) {
      try {
        // an ecency "images" entry may be an upload key or a URL
        entries.push(
          parseEntry(kind === 'url' && typeof value === 'string' && !value.includes('/') ? 'key' : kind, value, unwrap),
        );
      } catch {
        refused += 1;
      }
    }
  }
  return { entries, refused };
}

/**
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig }} deps
 */
export function createTakedownStore({ redis, config }) {
  const unwrap = unwrapOptions(config);
  return {
    unwrap,
    /**
     * Blocks (`add`), unblocks (`remove`) or sets (`replace`: a file's or a list URL's whole content) the
     * entries of one source. Returns the list version after, and the entries whose state changed.
     * @param {{ mode: 'add'|'remove'|'replace', source: string, entries: import('@stack/lib/src/takedowns.js').TakedownEntry[],
     *   by: string, reason: string, reference: string }} change
     */
    async apply({ mode, source, entries, by, reason, reference }) {
      const fields = [...new Set(entries.map(entryField))];
      const result = /** @type {string[]} */ (
        await redis.eval(
          APPLY,
          6,
          TAKEDOWN_KEYS.source(source),
          TAKEDOWN_KEYS.all,
          TAKEDOWN_KEYS.meta,
          TAKEDOWN_KEYS.version,
          config.PURGE_STREAM,
          TAKEDOWN_KEYS.audit,
          mode,
          source,
          by,
          reason,
          reference,
          String(Date.now()),
          String(config.TAKEDOWN_AUDIT_MAX),
          ...fields,
        )
      );
      // answered once the change would survive a failover (REDIS_ACK_REPLICAS); applying it again is harmless
      await awaitReplicas(redis, config);
      const changes = [];
      for (let i = 1; i < result.length; i += 2) changes.push({ action: result[i], ...entryOf(result[i + 1]) });
      return { version: Number(result[0]), changes };
    },
    /** Every entry in force, with who blocked it first and why. */
    async list() {
      const meta = await redis.hgetall(TAKEDOWN_KEYS.meta);
      const fields = await redis.hkeys(TAKEDOWN_KEYS.all);
      return fields.map((field) => ({ ...entryOf(field), ...safeJson(meta[field]) }));
    },
    /** The newest `count` audit records, newest first. @param {number} count */
    async audit(count) {
      const records = await redis.xrevrange(TAKEDOWN_KEYS.audit, '+', '-', 'COUNT', count);
      return records.map(([id, fields]) => {
        /** @type {Record<string, string | boolean>} */
        const record = { id };
        for (let i = 0; i < fields.length; i += 2) record[fields[i]] = fields[i + 1];
        record.effective = record.effective === '1';
        return record;
      });
    },
  };
}
/** @typedef {ReturnType<typeof createTakedownStore>} TakedownStore */

/** @param {string | undefined} text */
function safeJson(text) {
  try {
    return text ? JSON.parse(text) : {};
  } catch {
    return {};
  }
}

/**
 * The entries of an admin call's body: `{"kind": …, "value": …}` or `{"entries": [{kind, value}, …]}`, at most
 * `max`; every one must parse (a 400 names the first that does not).
 * @param {Record<string, unknown>} body @param {import('@stack/lib/src/sources.js').UnwrapOptions} unwrap @param {number} max
 */
export function entriesOfBody(body, unwrap, max) {
  const given = body.entries === undefined ? [{ kind: body.kind, value: body.value }] : body.entries;
  if (!Array.isArray(given) || !given.length)
    throw new HttpError(400, 'invalid_takedown', { reason: 'give kind and value, or entries: [{kind, value}]' });
  if (given.length > max) throw new HttpError(400, 'too_many_entries', { max, given: given.length });
  return given.map((entry, index) => {
    if (!entry || typeof entry !== 'object')
      throw new HttpError(400, 'invalid_takedown', { reason: 'an entry is {kind, value}', index });
    try {
      return parseEntry(String(entry.kind), entry.value, unwrap);
    } catch (err) {
      const httpError = err instanceof HttpError ? err : new HttpError(400, 'invalid_takedown');
      throw new HttpError(400, httpError.name, { ...httpError.info, index });
    }
  });
}
