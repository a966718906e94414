// Prometheus' part of the render: the scrape targets of prometheus.yml.template, and promtool's checks of a
// rendered config, its rules and their tests.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import bcrypt from 'bcryptjs';
import { ROOT, reachable } from '../resolve.js';

/** prometheus.yml's values. @param {Record<string, any>} config @returns {Record<string, string>} */
export function prometheusValues(config) {
  const targets = scrapeTargets(config);
  const edgeNodes =
    config.EDGE_VARNISH_NODES.length > 0 ||
    config.PROMETHEUS_SCRAPE.some((/** @type {string} */ entry) => entry.startsWith('edge-nodes='));
  return {
    REACH_ADDRESS: reachable(config.LISTEN_ADDRESS),
    ...targets,
    // nginx's checks of a varnish cluster's nodes (nginx/edge-nodes.lua.template), on its status port
    EDGE_NODES_JOB: edgeNodes
      ? `  - job_name: edge-nodes\n    metrics_path: /edge-nodes\n    static_configs: [{ targets: [${targets.SCRAPE_EDGE_NODES}] }]`
      : '  # edge-nodes: no varnish cluster (EDGE_VARNISH_NODES) here',
  };
}

/** The files of Prometheus' secrets, in its conf directory: each its user's alone (infra/users.js). */
export const PROMETHEUS_SECRET_FILES = ['haproxy-password', 'metrics-password', 'web.yml'];

/**
 * The bcrypt hash of the password: the one the file already holds while it still matches (a new salt each
 * render would make every `reload` reload prometheus), else a new one.
 * @param {string} file @param {string} password
 */
function passwordHash(file, password) {
  const held = fs.existsSync(file) ? /metrics: '([^']+)'/.exec(fs.readFileSync(file, 'utf8'))?.[1] : undefined;
  return held && bcrypt.compareSync(password, held) ? held : bcrypt.hashSync(password, 10);
}

/**
 * Prometheus' secrets, from files only its user reads: the stats password it scrapes haproxy with, the metrics
 * password it scrapes the services with, and its own web config asking that password of whoever reads it
 * (user `metrics`; any local user reaches a loopback port, #51). @param {string} confDir
 * @param {string} statsPassword @param {string} metricsPassword
 */
export function writePrometheusSecrets(confDir, statsPassword, metricsPassword) {
  const dir = path.join(confDir, 'prometheus');
  const web = `# Prometheus' HTTP API and UI: user metrics, METRICS_PASSWORD (rendered by infra/render.js)\nbasic_auth_users:\n  metrics: '${passwordHash(path.join(dir, 'web.yml'), metricsPassword)}'\n`;
  for (const [name, text] of [
    ['haproxy-password', statsPassword],
    ['metrics-password', metricsPassword],
    ['web.yml', web],
  ]) {
    fs.writeFileSync(path.join(dir, name), text, { mode: 0o600 });
    fs.chmodSync(path.join(dir, name), 0o600);
  }
}

/**
 * promtool on a rendered config: the config, every rule file, and the rules' unit tests.
 * @param {string} confDir the rendered conf/ directory
 */
export function checkPrometheus(confDir) {
  const prometheus = path.join(confDir, 'prometheus');
  execFileSync('promtool', ['check', 'config', path.join(prometheus, 'prometheus.yml')], { stdio: 'inherit' });
  const ruleFiles = fs
    .readdirSync(path.join(prometheus, 'rules'))
    .filter((name) => name.endsWith('.yml') && !name.endsWith('.test.yml'));
  execFileSync('promtool', ['check', 'rules', ...ruleFiles.map((name) => path.join(prometheus, 'rules', name))], {
    stdio: 'inherit',
  });
  const tests = path.join(ROOT, 'monitoring', 'tests');
  const files = fs.readdirSync(tests).filter((name) => name.endsWith('.yml'));
  execFileSync('promtool', ['test', 'rules', ...files.map((name) => path.join(tests, name))], {
    stdio: 'inherit',
    cwd: tests,
  });
}

/**
 * Prometheus' targets per job: this stack's own addresses, unless PROMETHEUS_SCRAPE names the job
 * (`job=host:port`, one entry per target). A service bound to every address is scraped on loopback.
 * @param {Record<string, any>} config @returns {Record<string, string>} SCRAPE_<JOB> → the YAML list's items
 */
function scrapeTargets(config) {
  const own = reachable(config.LISTEN_ADDRESS);
  /** @type {Record<string, string>} */
  const defaults = {
    haproxy: `${config.HAPROXY_HOST}:${config.HAPROXY_STATS_PORT}`,
    varnish: `${config.VARNISH_HOST}:${config.VARNISH_EXPORTER_PORT}`,
    nginx: `${own}:${config.NGINX_EXPORTER_PORT}`,
    'edge-nodes': `${own}:${config.NGINX_STATUS_PORT}`,
    redis: `${own}:${config.REDIS_EXPORTER_PORT}`,
    mtail: `${own}:${config.MTAIL_PORT}`,
    origin: `${reachable(config.ORIGIN_HOST)}:${config.ORIGIN_METRICS_PORT}`,
    'avatar-resolver': `${reachable(config.AVATAR_RESOLVER_HOST)}:${config.AVATAR_RESOLVER_METRICS_PORT}`,
    'purge-service': `${reachable(config.PURGE_SERVICE_HOST)}:${config.PURGE_SERVICE_METRICS_PORT}`,
  };
  /** @type {Record<string, string[]>} */
  const given = {};
  for (const entry of config.PROMETHEUS_SCRAPE) {
    const [job, target] = entry.split('=');
    if (!(job in defaults) || !/^[^\s:]+:\d+$/.test(target || ''))
      throw new Error(
        `PROMETHEUS_SCRAPE: "${entry}" is not job=host:port with a job of ${Object.keys(defaults).join(', ')}`,
      );
    (given[job] ||= []).push(target);
  }
  return Object.fromEntries(
    Object.entries(defaults).map(([job, target]) => [
      `SCRAPE_${job.toUpperCase().replace('-', '_')}`,
      (given[job] || [target]).map((address) => `'${address}'`).join(', '),
    ]),
  );
}
