import { commonSettings, hiveSettings, purgeQueueSettings, sharedSettings } from '@stack/lib';

/** @type {import('@stack/lib/src/config.js').Setting[]} */
export const settings = [
  ...commonSettings('avatar-resolver', 8801, 9801),
  ...sharedSettings,
  ...hiveSettings,
  ...purgeQueueSettings,
  { name: 'AVATAR_SOURCE', type: 'string', default: 'local', doc: 'where account → image mappings come from', choices: ['local', 'hive', 'http'] },
  { name: 'AVATAR_HTTP_URL', type: 'string', default: 'http://127.0.0.1:3001/api/users/{account}', doc: 'http source: your app\'s user endpoint, {account} is replaced' },
  { name: 'AVATAR_HTTP_AVATAR_PATH', type: 'string', default: 'profile.avatar', doc: 'http source: JSON path of the avatar URL' },
  { name: 'AVATAR_HTTP_COVER_PATH', type: 'string', default: 'profile.cover', doc: 'http source: JSON path of the cover URL' },
  { name: 'AVATAR_DEFAULT_URL', type: 'url', default: '', doc: 'image for accounts without an avatar; empty: the resolver\'s built-in silhouette' },
  { name: 'AVATAR_ADMIN_TOKEN', type: 'string', default: '', doc: 'Bearer token of PUT /admin/accounts/<account> (local source); empty disables it', secret: true },
  { name: 'AVATAR_CACHE_TTL_S', type: 'int', default: '86400', doc: 'how long a resolved mapping is trusted in Redis (the purge service deletes it on change)', min: 1 },
  { name: 'AVATAR_NEGATIVE_TTL_S', type: 'int', default: '60', doc: 'how long "no such account" is remembered', min: 0 },
  { name: 'AVATAR_MEMORY_ENTRIES', type: 'int', default: '50000', doc: 'in-process LRU entries in front of Redis', min: 0 },
  { name: 'AVATAR_MEMORY_TTL_MS', type: 'int', default: '60000', doc: 'in-process LRU lifetime (purges also evict it at once, by Redis pub/sub)', min: 1 },
  { name: 'AVATAR_BATCH_MAX', type: 'int', default: '50', doc: 'most accounts in one upstream call', min: 1 },
  { name: 'AVATAR_BATCH_WAIT_MS', type: 'int', default: '10', doc: 'how long misses wait to be batched together (small next to an upstream round trip)', min: 0 },
  { name: 'AVATAR_UPSTREAM_TIMEOUT_MS', type: 'int', default: '2000', doc: 'timeout of one upstream lookup', min: 1 },
  { name: 'AVATAR_BREAKER_FAILURES', type: 'int', default: '5', doc: 'consecutive upstream failures that open the circuit', min: 1 },
  { name: 'AVATAR_BREAKER_COOLDOWN_MS', type: 'int', default: '10000', doc: 'how long the circuit stays open before one trial call', min: 1 },
  { name: 'AVATAR_REDIRECT_BASE', type: 'string', default: '', doc: 'prefix of redirect targets; empty: relative /p/… on the host that was asked' },
  { name: 'CACHE_CONTROL_SPELLING', type: 'string', default: 'public, max-age=86400', doc: 'Cache-Control of the 301 from another spelling of an avatar URL (an unknown size, a trailing slash) to its one URL' },
  { name: 'CACHE_CONTROL_REDIRECT', type: 'string', default: 'public, max-age=600, s-maxage=86400, stale-while-revalidate=60', doc: 'Cache-Control of avatar and cover 302s (shared caches are purged on change)' },
  { name: 'CACHE_CONTROL_DEGRADED_REDIRECT', type: 'string', default: 'public, max-age=60, s-maxage=60', doc: 'Cache-Control of a 302 made from a stale mapping or the default while the upstream is down' },
  { name: 'CACHE_CONTROL_NEGATIVE', type: 'string', default: 'public, max-age=60', doc: 'Cache-Control of 4xx answers (negative caching)' },
];
