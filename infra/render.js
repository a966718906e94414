// Renders every component's config from the one set of settings into $STACK_DIR/conf, and writes
// $STACK_DIR/env (every setting resolved, for the processes). Prints STACK_DIR.
//   node infra/render.js                 render, print STACK_DIR
//   node infra/render.js --dir-only      print STACK_DIR only
//   node infra/render.js --check-prometheus   render into a temp dir and run promtool on it
//   (also --stack-users, --secret-names, --edge-address, --vcl-parts DIR; any other flag or word is refused)
// Settings are resolved in resolve.js; each component's template values come from its module in render/
// (nginx.js, varnish.js, haproxy.js, redis.js, prometheus.js, supervisor.js); users.js says who owns what.
import '../lib/src/node-version.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { makeDir } from './dirs.js';
import { haproxyValues } from './render/haproxy.js';
import { copyTls, nginxValues } from './render/nginx.js';
import { checkPrometheus, prometheusValues, writePrometheusSecrets } from './render/prometheus.js';
import { redisValues, writeSentinelConfig } from './render/redis.js';
import { keepPrograms, supervisorValues } from './render/supervisor.js';
import { varnishSizes, varnishValues } from './render/varnish.js';
import { ROOT, reachable, resolveSettings } from './resolve.js';
import {
  embeddedS3Credentials,
  metricsPassword,
  redisPassword,
  secretNames,
  shellLines,
  writeSecrets,
} from './secrets.js';
import { allSections, allSettings } from './settings.js';
import { ROLES, giveToStackUsers, programDirs, settingsGroup, stackUsers } from './users.js';

/**
 * Every template's values: each setting as text, the run directories, and what each component's module
 * derives for its own template. @param {Record<string, any>} config @returns {Record<string, string>}
 */
export function templateValues(config) {
  const dirs = {
    ROOT,
    CONF_DIR: path.join(config.STACK_DIR, 'conf'),
    RUN_DIR: path.join(config.STACK_DIR, 'run'),
    LOG_DIR: path.join(config.STACK_DIR, 'logs'),
    DATA_ROOT: path.join(config.STACK_DIR, 'data'),
  };
  /** @type {Record<string, string>} */
  const values = {};
  for (const [name, value] of Object.entries(config))
    values[name] = Array.isArray(value) ? value.join(',') : String(value);
  return {
    ...values,
    ...dirs,
    ...supervisorValues(config, dirs),
    ...nginxValues(config, dirs),
    ...varnishValues(config),
    ...haproxyValues(config),
    ...redisValues(config),
    ...prometheusValues(config),
  };
}

/**
 * ${NAME} → value, strictly: a name without a value is an error, so a typo cannot render silently.
 * @param {string} text @param {Record<string, string>} values @param {string} source
 */
export function substitute(text, values, source) {
  return text.replace(/\$\{([A-Z][A-Z0-9_]*)\}/g, (_match, name) => {
    if (!(name in values)) throw new Error(`${source}: no value for \${${name}}`);
    return values[name];
  });
}

/** Every template and where it goes under conf/. */
export const TEMPLATES = [
  ['nginx/nginx.conf.template', 'nginx.conf'],
  ['nginx/upload-body.lua.template', 'nginx/upload-body.lua'],
  ['nginx/edge-nodes.lua.template', 'nginx/edge_nodes.lua'],
  ['nginx/hosts.lua.template', 'nginx/hosts.lua'],
  ['vcl/default.vcl.template', 'varnish/default.vcl'],
  ['vcl/sizes.vcl.template', 'varnish/sizes.vcl'],
  ['vcl/limits.vcl.template', 'varnish/limits.vcl'],
  ['vcl/policy.vcl.template', 'varnish/policy.vcl'],
  ['vcl/uploads.vcl.template', 'varnish/uploads.vcl'],
  ['haproxy/haproxy.cfg.template', 'haproxy.cfg'],
  ['haproxy/errors/503.http', 'haproxy-errors/503.http'],
  ['haproxy/errors/504.http', 'haproxy-errors/504.http'],
  ['haproxy/errors/502.http', 'haproxy-errors/502.http'],
  ['infra/redis.conf.template', 'redis.conf'],
  ['infra/supervisord.conf.template', 'supervisord.conf'],
  ['monitoring/prometheus.yml.template', 'prometheus/prometheus.yml'],
];

/** Rendered configs that hold a secret. */
const SECRET_CONFIGS = ['haproxy.cfg', 'redis.conf'];

/**
 * `dir` at least 0755. One this user does not own is left as it is when it already allows that (a Kubernetes
 * emptyDir is root's, mode 0777: only its owner may chmod it), and refused by name when it does not.
 * @param {string} dir
 */
function searchable(dir) {
  const { uid, mode } = fs.statSync(dir);
  const me = process.getuid?.();
  if (uid === me || me === 0) return fs.chmodSync(dir, 0o755);
  if ((mode & 0o755) !== 0o755)
    throw new Error(`${dir} is not this user's and not searchable by others (mode ${(mode & 0o777).toString(8)})`);
}

/**
 * Renders everything into config.STACK_DIR. @param {Record<string, any>} config
 * @param {import('../lib/src/config.js').Setting[]} [settings] every declared setting (which are secrets)
 * @param {Array<[string, import('../lib/src/config.js').Setting[]]>} [sections] each service's own settings
 */
export function renderAll(config, settings = [], sections = []) {
  embeddedS3Credentials(config);
  config.REDIS_PASSWORD = redisPassword(config);
  config.METRICS_PASSWORD = metricsPassword(config);
  const values = templateValues(config);
  for (const dir of [
    values.CONF_DIR,
    values.RUN_DIR,
    values.LOG_DIR,
    values.DATA_ROOT,
    ...programDirs(config, values).map(([dir]) => dir),
  ]) {
    makeDir(dir, 0o755);
  }
  // searchable by varnish's users (its workdir is in run/, its VCL in conf/varnish) whatever the umask
  for (const dir of [config.STACK_DIR, values.CONF_DIR, values.RUN_DIR]) searchable(dir);
  // the logs are the operator's (a stack of stack users gives them to the edge's group below)
  fs.chmodSync(values.LOG_DIR, 0o700);
  for (const [template, target] of TEMPLATES) {
    const source = path.join(ROOT, template);
    if (!fs.existsSync(source)) continue;
    const output = path.join(values.CONF_DIR, target);
    makeDir(path.dirname(output), 0o755);
    // a config that holds a secret (haproxy.cfg: the stats password) is the stack user's alone, from its creation
    const secret = SECRET_CONFIGS.includes(target);
    const text = substitute(fs.readFileSync(source, 'utf8'), values, template);
    fs.writeFileSync(output, target === 'supervisord.conf' ? keepPrograms(text, config.STACK_PROGRAMS) : text, {
      mode: secret ? 0o600 : 0o644,
    });
    if (secret) fs.chmodSync(output, 0o600);
  }
  // nginx's Lua beside nginx.conf, readable by nginx's user whatever the umask
  fs.chmodSync(path.join(values.CONF_DIR, 'nginx'), 0o755);
  copyTls(config, values.CONF_DIR);
  writePrometheusSecrets(values.CONF_DIR, values.HAPROXY_STATS_PASSWORD, config.METRICS_PASSWORD);
  writeSentinelConfig(config, path.join(values.DATA_ROOT, 'redis-sentinel'));
  giveToStackUsers(config, values);
  // the VCL logic is not templated: copied beside default.vcl, found through vcl_path
  for (const file of fs.readdirSync(path.join(ROOT, 'vcl')).filter((name) => name.endsWith('.vcl'))) {
    fs.copyFileSync(path.join(ROOT, 'vcl', file), path.join(values.CONF_DIR, 'varnish', file));
  }
  fs.chmodSync(path.join(values.CONF_DIR, 'varnish'), 0o755);
  for (const file of fs.readdirSync(path.join(values.CONF_DIR, 'varnish')))
    fs.chmodSync(path.join(values.CONF_DIR, 'varnish', file), 0o644);
  // mtail's programs beside the configs (a container of the components image has no checkout)
  fs.cpSync(path.join(ROOT, 'monitoring', 'mtail'), path.join(values.CONF_DIR, 'mtail'), { recursive: true });
  const rules = path.join(ROOT, 'monitoring', 'rules');
  if (fs.existsSync(rules)) fs.cpSync(rules, path.join(values.CONF_DIR, 'prometheus', 'rules'), { recursive: true });
  // every setting but the secrets, which each program gets apart (infra/secrets.js)
  const secrets = secretNames(settings);
  config.HAPROXY_STATS_PASSWORD = values.HAPROXY_STATS_PASSWORD;
  fs.writeFileSync(
    path.join(config.STACK_DIR, 'env'),
    shellLines(Object.entries(config).filter(([name]) => !secrets.includes(name))),
    { mode: 0o600 },
  );
  const readers = settingsGroup(config);
  if (readers !== null) {
    fs.chownSync(path.join(config.STACK_DIR, 'env'), 0, readers);
    fs.chmodSync(path.join(config.STACK_DIR, 'env'), 0o640);
  }
  const serviceSettings = Object.fromEntries(
    sections.map(([name, list]) => [name, list.map((setting) => setting.name)]),
  );
  writeSecrets(config, secrets, stackUsers(config), values.CONF_DIR, values.REDIS_EXPORTER_ADDR, serviceSettings);
  return values;
}

/** The command line's flags; an unknown one or a stray word is refused, never taken for a plain render. */
function flags() {
  const boolean = /** @type {const} */ ({ type: 'boolean' });
  return parseArgs({
    options: {
      'stack-users': boolean,
      'secret-names': boolean,
      'dir-only': boolean,
      'edge-address': boolean,
      'check-prometheus': boolean,
      'vcl-parts': { type: 'string' },
    },
  }).values;
}

async function main() {
  const given = flags();
  const config = await resolveSettings();
  if (given['stack-users']) {
    if (process.getuid?.() === 0 && config.STACK_USER_PREFIX)
      process.stdout.write(`${ROLES.map((role) => `${config.STACK_USER_PREFIX}${role}`).join('\n')}\n`);
    return;
  }
  if (given['secret-names']) {
    process.stdout.write(`${secretNames(await allSettings()).join('\n')}\n`);
    return;
  }
  if (given['dir-only']) {
    process.stdout.write(`${config.STACK_DIR}\n`);
    return;
  }
  if (given['edge-address']) {
    // where this stack's nginx listens (the launcher asks whether another stack holds it)
    process.stdout.write(`${reachable(config.NGINX_BIND)} ${config.NGINX_PORT}\n`);
    return;
  }
  const vclDir = given['vcl-parts'];
  if (vclDir !== undefined) {
    // varnishtest's copy of the VCL has no rendered files: these, from the settings
    const values = {
      VARNISH_SIZE_LINES: varnishSizes(config),
      VARNISH_MISS_LIMIT: String(config.VARNISH_MISS_LIMIT),
      VARNISH_MISS_PERIOD_S: String(config.VARNISH_MISS_PERIOD_S),
      VARNISH_GRACE_HEALTHY_S: String(config.VARNISH_GRACE_HEALTHY_S),
      VARNISH_GRACE_SICK_S: String(config.VARNISH_GRACE_SICK_S),
      VARNISH_UPLOAD_RETRY_BYTES: String(config.VARNISH_UPLOAD_RETRY_BYTES),
    };
    for (const part of ['sizes', 'limits', 'policy', 'uploads'])
      fs.writeFileSync(
        path.join(vclDir, `${part}.vcl`),
        substitute(fs.readFileSync(path.join(ROOT, 'vcl', `${part}.vcl.template`), 'utf8'), values, `${part}.vcl`),
      );
    return;
  }
  if (given['check-prometheus']) {
    config.STACK_DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'render-check-'));
    const values = renderAll(config, await allSettings());
    checkPrometheus(values.CONF_DIR);
    fs.rmSync(config.STACK_DIR, { recursive: true, force: true });
    return;
  }
  renderAll(config, await allSettings(), await allSections());
  process.stdout.write(`${config.STACK_DIR}\n`);
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`render: ${err.message}\n`);
    process.exit(2);
  });
}
