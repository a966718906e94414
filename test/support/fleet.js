// `./infra/stack fleet` on loopback addresses of its own, in a directory of its own: for the fleet test and
// bench/purge.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../../infra/resolve.js';
import { allSettings } from '../../infra/settings.js';

/** the stack's setting names: the caller's environment's are left out (the fleet's layout and `settings` decide) */
const SETTINGS = new Set((await allSettings()).map((setting) => setting.name));

/**
 * The fleet's settings (machines a, b, c on `hosts`) and its commands; nothing runs until `fleet('up')`.
 * @param {string[]} hosts @param {Record<string, string>} settings @param {{ timeoutMs?: number }} [options] a command's time limit
 */
export function fleetOn(hosts, settings, { timeoutMs = 600_000 } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fleet-'));
  fs.chmodSync(dir, 0o755);
  // a shell's exported NGINX_PORT (the environment wins over a machine's file) moved every edge off the
  // ports the layout names (…:8080 in PUBLIC_URL and the tests)
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !SETTINGS.has(name)));
  const env = { ...inherited, FLEET_HOSTS: hosts.join(','), FLEET_DIR: dir, LOG_LEVEL: 'warn', ...settings };
  /** ./infra/stack fleet <action>, which must succeed. @param {string} action */
  const fleet = (action) => {
    const result = spawnSync(`${ROOT}/infra/stack`, ['fleet', action], {
      env,
      encoding: 'utf8',
      timeout: timeoutMs,
      cwd: ROOT,
    });
    if (result.status !== 0) throw new Error(`fleet ${action}:\n${(result.stdout + result.stderr).slice(-4000)}`);
  };
  /** The fleet's Redis password (infra/fleet.js keeps the shared secrets in secrets.env once `up` made them). */
  const redisPassword = () =>
    (fs.readFileSync(path.join(dir, 'secrets.env'), 'utf8').match(/^REDIS_PASSWORD=(.*)$/m) || [])[1] || '';
  return { dir, env, fleet, redisPassword, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
