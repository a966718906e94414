// Every setting is declared once (name, type, default, doc) and read from the environment.
// `.env.example` and the README settings table are generated from the same declarations.

/**
 * @typedef {'string'|'int'|'number'|'bool'|'list'|'urls'|'url'|'bytes'} SettingType
 * @typedef {{ name: string, type: SettingType, default: string, doc: string, choices?: string[], secret?: boolean, min?: number, max?: number }} Setting
 */

/** @param {string} text */
function parseBytes(text) {
  const match = /^(\d+(?:\.\d+)?)\s*(b|k|kb|m|mb|g|gb)?$/i.exec(text.trim());
  if (!match) return NaN;
  const scale = { b: 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3 };
  const unit = /** @type {keyof scale} */ ((match[2] || 'b').toLowerCase());
  return Math.round(Number(match[1]) * scale[unit]);
}

/**
 * @param {Setting} setting
 * @param {string} raw
 * @returns {unknown}
 */
function parseValue(setting, raw) {
  const fail = (/** @type {string} */ why) => {
    throw new Error(`invalid setting ${setting.name}=${JSON.stringify(raw)}: ${why}`);
  };
  switch (setting.type) {
    case 'int':
    case 'number':
    case 'bytes': {
      const value = setting.type === 'bytes' ? parseBytes(raw) : Number(raw);
      if (!Number.isFinite(value)) fail(`expected ${setting.type === 'bytes' ? 'a size like 15mb' : 'a number'}`);
      if (setting.type === 'int' && !Number.isInteger(value)) fail('expected an integer');
      if (setting.min !== undefined && value < setting.min) fail(`must be at least ${setting.min}`);
      if (setting.max !== undefined && value > setting.max) fail(`must be at most ${setting.max}`);
      return value;
    }
    case 'bool':
      if (!/^(true|false|1|0|yes|no)$/i.test(raw)) fail('expected true or false');
      return /^(true|1|yes)$/i.test(raw);
    case 'list':
      return raw
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean);
    case 'urls':
      return raw
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean)
        .map((item) => {
          if (!/^https?:\/\/[^/]/i.test(item)) fail(`${JSON.stringify(item)} is not an http(s) URL`);
          return new URL(item).toString().replace(/\/+$/, '');
        });
    case 'url':
      if (raw === '') return '';
      try {
        return new URL(raw).toString().replace(/\/$/, '');
      } catch {
        return fail('expected an absolute URL');
      }
    default:
      if (setting.choices && !setting.choices.includes(raw)) fail(`expected one of ${setting.choices.join(', ')}`);
      return raw;
  }
}

/**
 * Reads the declared settings from `env`, validating each; throws an Error naming the variable.
 * @param {Setting[]} settings
 * @param {Record<string, string | undefined>} [env]
 * @returns {Record<string, any>}
 */
export function loadConfig(settings, env = process.env) {
  /** @type {Record<string, any>} */
  const config = {};
  for (const setting of settings) {
    const raw = env[setting.name];
    config[setting.name] = parseValue(setting, raw === undefined ? setting.default : raw);
  }
  return config;
}

/** The edit distance of two names (insertions, deletions, substitutions, transpositions). @param {string} a @param {string} b */
function distance(a, b) {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j += 1) rows[0][j] = j;
  for (let i = 1; i <= a.length; i += 1) {
    for (let j = 1; j <= b.length; j += 1) {
      rows[i][j] = Math.min(
        rows[i - 1][j] + 1,
        rows[i][j - 1] + 1,
        rows[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
    }
  }
  return rows[a.length][b.length];
}

/** The declared setting nearest to `name` (a misspelling's likely meaning). @param {string} name @param {Iterable<string>} known */
export function nearestSetting(name, known) {
  let best = '';
  let score = Infinity;
  for (const candidate of known) {
    const d = distance(name.toUpperCase(), candidate);
    if (d < score) [best, score] = [candidate, d];
  }
  return best;
}

/**
 * Refuses names that are no declared setting, each with the nearest one named: a misspelt setting would
 * otherwise do nothing, quietly. @param {string[]} names @param {Setting[]} settings @param {string} where
 */
export function refuseUnknown(names, settings, where) {
  const known = new Set(settings.map((setting) => setting.name));
  const unknown = names.filter((name) => !known.has(name));
  if (!unknown.length) return;
  throw new Error(
    unknown
      .map((name) => `${where}: ${name} is not a setting (did you mean ${nearestSetting(name, known)}?)`)
      .join('\n'),
  );
}

/**
 * @param {string} title
 * @param {Setting[]} settings
 */
export function envExample(title, settings) {
  const lines = [`# ── ${title} ──`];
  for (const setting of settings) {
    lines.push(`# ${setting.doc}${setting.choices ? ` (${setting.choices.join('|')})` : ''}`);
    lines.push(`${setting.secret ? '# ' : ''}${setting.name}=${setting.default}`);
  }
  return lines.join('\n') + '\n';
}

/** Settings every Node service has. @param {string} service @param {number} port @param {number} metricsPort */
export function commonSettings(service, port, metricsPort) {
  const prefix = service.toUpperCase().replace(/-/g, '_');
  /** @type {Setting[]} */
  const settings = [
    { name: `${prefix}_HOST`, type: 'string', default: '127.0.0.1', doc: `address the ${service} listens on` },
    { name: `${prefix}_PORT`, type: 'int', default: String(port), doc: `port of the ${service}`, min: 0 },
    {
      name: `${prefix}_SOCKET`,
      type: 'string',
      default: '',
      doc: `Unix socket the ${service} listens on instead of its host and port (the native stack's haproxy reaches it there, INTERNAL_SOCKETS); empty: TCP`,
    },
    {
      name: `${prefix}_METRICS_PORT`,
      type: 'int',
      default: String(metricsPort),
      doc: `Prometheus metrics port of the ${service} (kept off the public path)`,
      min: 0,
    },
  ];
  return settings;
}

export const sharedSettings = /** @type {Setting[]} */ ([
  {
    name: 'LOG_LEVEL',
    type: 'string',
    default: 'info',
    doc: 'pino log level',
    choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
  },
  {
    name: 'REDIS_URL',
    type: 'string',
    default: 'redis://127.0.0.1:6379/0',
    doc: 'Redis for caches, quotas and the purge queue (with REDIS_SENTINELS: only its password and database number count)',
  },
  {
    name: 'REDIS_USERNAME',
    type: 'string',
    default: '',
    doc: 'Redis ACL user; the native stack and compose give each service a user of its own (with a password derived from REDIS_PASSWORD) and set this; empty: the default user',
  },
  {
    name: 'REDIS_PASSWORD',
    type: 'string',
    default: '',
    doc: "Redis's and the sentinels' password (requirepass); the native stack generates one into STACK_DIR/secrets when empty, a fleet shares one (secrets.env)",
    secret: true,
  },
  {
    name: 'METRICS_PASSWORD',
    type: 'string',
    default: '',
    doc: "password of the services' metrics ports and Prometheus (user `metrics`, HTTP basic auth): any local user reaches a loopback port; the native stack generates one into STACK_DIR/secrets when empty, a fleet shares one (secrets.env); empty on a service run by hand: its metrics open",
    secret: true,
  },
  {
    name: 'REDIS_SENTINELS',
    type: 'list',
    default: '',
    doc: "Redis Sentinel addresses (host:port list): the master is asked of them and followed across a failover; empty: REDIS_URL's server",
  },
  {
    name: 'REDIS_MASTER_NAME',
    type: 'string',
    default: 'mymaster',
    doc: "the master's name in the sentinels' configuration",
  },
  {
    name: 'REDIS_ACK_REPLICAS',
    type: 'int',
    default: '0',
    doc: "replicas that must hold a purge or takedown event before it is acknowledged (WAIT); 0: the master's own disk (appendfsync always) only; 1 with a replica: an acknowledged event survives a failover",
    min: 0,
  },
  {
    name: 'REDIS_ACK_TIMEOUT_MS',
    type: 'int',
    default: '1000',
    doc: 'longest wait for those replicas; then a 503 (the event may still be applied: purges are idempotent)',
    min: 1,
  },
  {
    name: 'SHUTDOWN_DRAIN_S',
    type: 'int',
    default: '0',
    doc: "seconds a Node service keeps serving after SIGTERM while its /healthz answers 404 (haproxy's soft stop: no new requests, those in flight finish), so haproxy and a Service's endpoints leave it before it stops listening (the chart sets 10: a deleted pod costs no request); 0: it stops listening at once (one box: `down` stops everything)",
    min: 0,
  },
  {
    name: 'PUBLIC_URL',
    type: 'url',
    default: 'http://127.0.0.1:8080',
    doc: 'the public base URL users reach (nginx or the CDN in front of it)',
  },
]);

export const hiveSettings = /** @type {Setting[]} */ ([
  {
    name: 'HIVE_API_URLS',
    type: 'list',
    default: 'https://api.hive.blog,https://api.openhive.network',
    doc: 'Hive API nodes (JSON-RPC), tried in turn',
  },
  { name: 'HIVE_API_TIMEOUT_MS', type: 'int', default: '2000', doc: 'timeout of one Hive API call', min: 1 },
]);

/** What every node that answers for images needs to enforce takedowns (origin, resolver, purge service). */
export const takedownSettings = /** @type {Setting[]} */ ([
  {
    name: 'UNWRAP_HOSTS',
    type: 'list',
    default: 'images.hive.blog,steemitimages.com,images.ecency.com',
    doc: 'image proxies whose /p/ and WxH URLs are unwrapped to the original they wrap (for serving and for takedown entries)',
  },
  {
    name: 'UPSTREAM_IMAGE_HOSTS',
    type: 'urls',
    default: '',
    doc: 'image hosts this one takes over from, that serve /<key>/<name> the images.hive.blog way (e.g. https://images.hive.blog): the origin asks them in turn for an upload key its store lacks and stores the bytes only if they make the key (Hive keys are content addresses); their /<key>/<name> URLs count as uploads of this host everywhere (serving, avatars, takedowns); empty: a missing key is a 404',
  },
  {
    name: 'TAKEDOWN_POLL_MS',
    type: 'int',
    default: '1000',
    doc: 'each node reloads the takedown list on every change notice, and checks its version this often besides',
    min: 50,
  },
  {
    name: 'SERVED_SOURCES_MAX',
    type: 'int',
    default: '200000',
    doc: 'sources whose served URLs are remembered in Redis for takedowns (oldest forgotten first): the CDN purge of a takedown names these URLs',
    min: 1,
  },
  {
    name: 'SERVED_PATHS_PER_SOURCE',
    type: 'int',
    default: '64',
    doc: 'served URLs remembered per source (sizes, formats, spellings)',
    min: 1,
  },
  {
    name: 'CACHE_CONTROL_TAKEDOWN',
    type: 'string',
    default: 'public, max-age=60',
    doc: 'Cache-Control of a 451 (short, so that an unblock shows in browsers too; shared caches are purged)',
  },
]);

export const whitelistSettings = /** @type {Setting[]} */ ([
  {
    name: 'PROXY_WHITELIST',
    type: 'string',
    default: 'off',
    choices: ['off', 'chain', 'haf'],
    doc: "which remote images /p/ proxies: off, every public one; chain, those a post or comment on the Hive chain references (recorded by the chain follower, HIVE_FOLLOW), as images.hive.blog does; haf, those a HAF proxy-whitelist service at PROXY_WHITELIST_URL vouches for. Others are a 403 (no-store); uploads, PROXY_WHITELIST_HOSTS and a preview token's requests pass; a check that fails lets the image through",
  },
]);

export const purgeQueueSettings = /** @type {Setting[]} */ ([
  {
    name: 'PURGE_STREAM',
    type: 'string',
    default: 'purge:events',
    doc: 'Redis stream of purge events (webhooks, admin updates, chain follower)',
  },
]);
