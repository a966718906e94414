// Applies a re-rendered stack to the running one (./infra/stack reload BEFORE_DIR, BEFORE_DIR holding the
// conf/, secrets/ and env of the stack as it ran), each program in the gentlest way it allows: nginx and
// prometheus read theirs again (SIGHUP), haproxy starts new workers that take the listeners over while the old
// ones finish their requests (master-worker, SIGUSR2), varnish compiles the new VCL and switches to it with its
// cache kept; a service whose settings changed, redis, mtail and a program whose command line changed (a
// port, varnish's storage) are restarted, a service on a socket that hold-socket holds by its holder (SIGHUP:
// the next process takes the socket, no request refused; lib/src/hold-socket.js). Every new config is
// checked first: one that fails puts the files back as they were and changes nothing.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { servicePid } from '../lib/src/hold-socket.js';
import { alive, startTicks } from '../lib/src/process-tree.js';
import { httpOnSocket } from './wait-healthy.js';

/**
 * @typedef {{ program: string, action: 'restart' | 'handover' | 'hup' | 'haproxy' | 'vcl', why: string, newCommand?: boolean, socket?: string }} Step
 * newCommand: restarted with its new supervisord command line (`supervisorctl update`); handover: restarted
 * by the holder of its socket (`socket`)
 */

// how long a service restarted by its holder may take to serve again
const HANDOVER_WAIT_MS = 30_000;

/** The files that reloading compares (relative path → its sha256): conf/, secrets/ and env. @param {string} dir */
export function snapshot(dir) {
  /** @type {Map<string, string>} */
  const files = new Map();
  const tops = ['conf', 'secrets', 'env'].filter((top) => fs.existsSync(path.join(dir, top)));
  for (const top of tops) {
    const relatives = fs.statSync(path.join(dir, top)).isDirectory()
      ? fs.readdirSync(path.join(dir, top), { recursive: true }).map((name) => path.join(top, String(name)))
      : [top];
    for (const relative of relatives)
      if (fs.statSync(path.join(dir, relative)).isFile())
        files.set(
          relative,
          createHash('sha256')
            .update(fs.readFileSync(path.join(dir, relative)))
            .digest('hex'),
        );
  }
  return files;
}

/** The files added, removed or changed between two snapshots. @param {Map<string, string>} before @param {Map<string, string>} after */
export function changedFiles(before, after) {
  const names = new Set([...before.keys(), ...after.keys()]);
  return [...names].filter((name) => before.get(name) !== after.get(name)).sort();
}

/** A supervisord.conf's program sections: name → its text. @param {string} text */
export function programSections(text) {
  /** @type {Map<string, string>} */
  const sections = new Map();
  let current = '';
  for (const line of text.split('\n')) {
    const header = /^\[(?:program:)?([^\]]+)\]/.exec(line);
    if (header) current = line.startsWith('[program:') ? header[1] : '';
    else if (current) sections.set(current, `${sections.get(current) || ''}${line}\n`);
  }
  return sections;
}

/** The socket hold-socket holds in a program's supervisord section, if it runs under one. @param {string} [section] */
const heldSocketOf = (section = '') => /\/hold-socket "([^"]+)"/.exec(section)?.[1];

/** Which program reads a rendered file, and how it takes a new one. */
const READERS = /** @type {Array<[RegExp, string, Step['action']]>} */ ([
  [/^conf\/(nginx\.conf|nginx\/|tls\/)/, 'nginx', 'hup'],
  [/^conf\/(haproxy\.cfg|haproxy-errors\/)/, 'haproxy', 'haproxy'],
  [/^conf\/varnish\//, 'varnish', 'vcl'],
  [/^conf\/prometheus\//, 'prometheus', 'hup'],
  [/^conf\/redis\.conf$/, 'redis', 'restart'],
  [/^conf\/mtail\//, 'mtail', 'restart'],
  [/^conf\/redis-exporter-passwords\.json$/, 'redis-exporter', 'restart'],
  [/^secrets\/origin\.env$/, 'origin', 'restart'],
  [/^secrets\/avatar-resolver\.env$/, 'avatar-resolver', 'restart'],
  [/^secrets\/purge-service\.env$/, 'purge-service', 'restart'],
  [/^secrets\/versitygw\.env$/, 'versitygw', 'restart'],
]);

/** The order steps run in: the data first, the services, then the proxies outwards, the rest last. */
const ORDER = ['redis', 'versitygw', 'origin', 'avatar-resolver', 'purge-service', 'haproxy', 'varnish', 'nginx'];

/**
 * What reloading does, from what changed: a program whose supervisord section changed is restarted with its
 * new command line (a restart of varnish empties its cache: said in `why`); any other takes its files as
 * READERS says. Programs this stack does not run are left out.
 * @param {{ changed: string[], sectionsBefore: Map<string, string>, sectionsAfter: Map<string, string>, running: string[] }} input
 * @returns {{ steps: Step[], unapplied: string[] }} unapplied: changed files no program takes without `up`
 */
export function planReload({ changed, sectionsBefore, sectionsAfter, running }) {
  /** @type {Map<string, Step>} */
  const steps = new Map();
  for (const [program, text] of sectionsAfter)
    if (running.includes(program) && sectionsBefore.get(program) !== text)
      steps.set(program, {
        program,
        action: 'restart',
        why: program === 'varnish' ? 'its command line changed (its cache starts empty)' : 'its command line changed',
        newCommand: true,
      });
  /** @type {string[]} */
  const unapplied = [];
  for (const file of changed) {
    if (file === 'env' || file === 'conf/supervisord.conf' || /^secrets\/(all\.env|[a-z-]+-password)$/.test(file))
      continue;
    const reader = READERS.find(([pattern]) => pattern.test(file));
    if (!reader) {
      unapplied.push(file);
      continue;
    }
    const [, program, action] = reader;
    if (!running.includes(program) || steps.has(program)) continue;
    const socket = heldSocketOf(sectionsAfter.get(program));
    if (action === 'restart' && socket)
      steps.set(program, {
        program,
        action: 'handover',
        why: `${file} changed; its socket held, no request refused`,
        socket,
      });
    else steps.set(program, { program, action, why: `${file} changed` });
  }
  const rank = (/** @type {string} */ program) => (ORDER.includes(program) ? ORDER.indexOf(program) : ORDER.length);
  return { steps: [...steps.values()].sort((a, b) => rank(a.program) - rank(b.program)), unapplied };
}

/** @param {string} command @param {string[]} args */
const run = (command, args) => execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** supervisorctl of the stack whose configs are in `conf`. @param {string} conf */
const supervisorctl =
  (conf) =>
  (/** @type {string[]} */ ...args) =>
    run('supervisorctl', ['-c', path.join(conf, 'supervisord.conf'), ...args]);

/** What a failed program said. @param {unknown} err */
const said = (err) => {
  const failure = /** @type {any} */ (err);
  return `${failure.stderr || ''}${failure.stdout || ''}`.trim() || String(err);
};

/**
 * Checks each new config its program would take, before any is taken; varnish's VCL is compiled and loaded
 * (not used): returns its name. Throws with the program's own words when one is refused.
 * @param {Step[]} steps @param {Record<string, string>} dirs @param {Map<string, string>} sections each program's
 *   supervisord section (its user)
 */
function check(steps, dirs, sections) {
  const programs = steps.map((step) => step.program);
  const checks = /** @type {Array<[string, string, string[]]>} */ ([
    [
      'nginx',
      'nginx',
      [
        '-t',
        '-q',
        '-p',
        path.join(dirs.run, 'nginx'),
        '-c',
        path.join(dirs.conf, 'nginx.conf'),
        '-e',
        path.join(dirs.logs, 'nginx-error.log'),
      ],
    ],
    ['haproxy', 'haproxy', ['-c', '-f', path.join(dirs.conf, 'haproxy.cfg')]],
    [
      'prometheus',
      'promtool',
      ['check', 'config', '--syntax-only', path.join(dirs.conf, 'prometheus', 'prometheus.yml')],
    ],
  ]);
  for (const [program, command, args] of checks)
    if (programs.includes(program))
      try {
        // as the program's own user: nginx -t run as root makes its temp directories root's
        const user = /^user=(.+)$/m.exec(sections.get(program) || '')?.[1].trim();
        if (user && user !== 'root' && process.getuid?.() === 0) run('runuser', ['-u', user, '--', command, ...args]);
        else run(command, args);
      } catch (err) {
        throw new Error(`${program} refuses the new config:\n${said(err)}`);
      }
  if (!steps.some((step) => step.program === 'varnish' && step.action === 'vcl')) return '';
  const name = `reload_${Date.now()}`;
  try {
    varnishadm(dirs, 'vcl.load', name, path.join(dirs.conf, 'varnish', 'default.vcl'));
  } catch (err) {
    throw new Error(`varnish refuses the new VCL:\n${said(err)}`);
  }
  return name;
}

/** @param {Record<string, string>} dirs @param {...string} args */
const varnishadm = (dirs, ...args) => run('varnishadm', ['-n', path.join(dirs.run, 'varnish'), ...args]);

/**
 * Switches varnish to a loaded VCL and discards the older ones it no longer uses: the script compose's varnish
 * and a native follower of haproxy's name run too. @param {Record<string, string>} dirs @param {string} name
 */
function useVcl(dirs, name) {
  run(path.join(import.meta.dirname, 'docker', 'varnish-reload.sh'), [path.join(dirs.run, 'varnish'), '--use', name]);
}

/**
 * Restarts a service by its socket's holder and waits until the next process serves: a new one runs (the
 * holder starts it first; it goes on once the old one has stopped accepting and handed over, or has exited),
 * the old one has exited (until then the next one may still be loading, the old one answering), and the
 * socket's health check answered. A next one that cannot start leaves the old one serving: the wait fails.
 * @param {(...args: string[]) => string} ctl @param {string} program @param {string} socket
 */
async function handover(ctl, program, socket) {
  const holder = Number(ctl('pid', program).trim());
  const before = servicePid(holder);
  ctl('signal', 'HUP', program);
  const until = Date.now() + HANDOVER_WAIT_MS;
  let next = 0;
  for (;;) {
    const now = servicePid(holder);
    if (![0, before].includes(now)) next = now;
    if (next && now === next && !alive(before) && (await httpOnSocket(socket)())) return;
    // the next process seen, then gone while the old one still runs: the holder gave it up (it exited while
    // loading), and the old one serves on; said at once, not after the whole wait
    if (next && !alive(next) && alive(before))
      throw new Error(
        `${program}: the next process exited before it took over (its log says why); the running one still serves`,
      );
    if (Date.now() > until)
      throw new Error(
        alive(before)
          ? `${program}: the next process did not take over within ${HANDOVER_WAIT_MS / 1000} s (its log says why); the running one still serves`
          : `${program} did not serve again within ${HANDOVER_WAIT_MS / 1000} s`,
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** @param {Step} step @param {Record<string, string>} dirs @param {string} vcl */
async function apply(step, dirs, vcl) {
  const ctl = supervisorctl(dirs.conf);
  if (step.action === 'handover') await handover(ctl, step.program, String(step.socket));
  else if (step.action === 'restart') ctl(step.newCommand ? 'update' : 'restart', step.program);
  else if (step.action === 'hup') ctl('signal', 'HUP', step.program);
  else if (step.action === 'haproxy') ctl('signal', 'USR2', step.program);
  else useVcl(dirs, vcl);
}

/**
 * Puts the stack's files back as they were (the running programs' configs): changed ones copied back, new
 * ones removed. @param {string} before @param {Map<string, string>} then its snapshot @param {string} stackDir
 * @param {string[]} changed
 */
function restore(before, then, stackDir, changed) {
  for (const file of changed)
    if (then.has(file)) run('cp', ['-a', path.join(before, file), path.join(stackDir, file)]);
    else fs.rmSync(path.join(stackDir, file), { force: true });
}

/** The Node services: what `restart` starts again when no program is named. */
const SERVICES = ['origin', 'avatar-resolver', 'purge-service'];

/**
 * `./infra/stack restart [PROGRAM …]` (after an update of the code): each program named, or every Node
 * service, started again; one on a held socket by its holder (no request refused), any other by supervisord.
 * @param {string[]} named @param {Record<string, string>} dirs
 */
async function restart(named, dirs) {
  const sections = programSections(fs.readFileSync(path.join(dirs.conf, 'supervisord.conf'), 'utf8'));
  const ctl = supervisorctl(dirs.conf);
  const unknown = named.filter((program) => !sections.has(program));
  if (unknown.length)
    throw new Error(`no program ${unknown.join(', ')} in this stack (${[...sections.keys()].join(', ')})`);
  for (const program of named.length ? named : SERVICES.filter((service) => sections.has(service))) {
    const socket = heldSocketOf(sections.get(program));
    if (socket) await handover(ctl, program, socket);
    else ctl('restart', program);
    process.stdout.write(`${program}: restarted${socket ? ' (its socket held, no request refused)' : ''}\n`);
  }
}

/** How long a process has run, as supervisorctl says it (H:MM:SS). @param {number} pid */
function uptimeOf(pid) {
  // its start, in clock ticks since boot (100 a second on Linux), against the time since boot
  const started = startTicks(pid);
  if (started < 0) throw new Error(`process ${pid} is gone`);
  const bootS = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  const s = Math.max(0, Math.floor(bootS - started / 100));
  const pad = (/** @type {number} */ n) => String(n).padStart(2, '0');
  return `${Math.floor(s / 3600)}:${pad(Math.floor(s / 60) % 60)}:${pad(s % 60)}`;
}

/**
 * `./infra/stack status`'s lines of the services on held sockets: supervisord's uptime is their holder's, so
 * each one's own pid and uptime say whether it was started again since (a crash, a restart).
 * @param {Record<string, string>} dirs
 */
function serving(dirs) {
  const sections = programSections(fs.readFileSync(path.join(dirs.conf, 'supervisord.conf'), 'utf8'));
  const ctl = supervisorctl(dirs.conf);
  for (const [program, section] of sections) {
    if (!heldSocketOf(section)) continue;
    try {
      const holder = Number(ctl('pid', program).trim());
      const service = servicePid(holder);
      if (!holder || !service || service === holder) continue;
      const line = `serving   pid ${service}, uptime ${uptimeOf(service)} (under its socket holder, pid ${holder})`;
      process.stdout.write(`${program.padEnd(32)} ${line}\n`);
    } catch {
      // not running (supervisorctl says so above), or between two processes
    }
  }
}

async function main() {
  const stackDir = String(process.env.STACK_DIR);
  // in the run directory, as up starts the programs: a check run as a program's user from a private checkout
  // fails on the way (haproxy -c: "Impossible to get back to initial directory")
  process.chdir(stackDir);
  const dirs = {
    conf: path.join(stackDir, 'conf'),
    run: path.join(stackDir, 'run'),
    logs: path.join(stackDir, 'logs'),
  };
  if (process.argv[2] === '--restart') return restart(process.argv.slice(3), dirs);
  if (process.argv[2] === '--serving') return serving(dirs);
  const before = process.argv[2];
  const sectionsBefore = programSections(fs.readFileSync(path.join(before, 'conf', 'supervisord.conf'), 'utf8'));
  const sectionsAfter = programSections(fs.readFileSync(path.join(dirs.conf, 'supervisord.conf'), 'utf8'));
  const status = supervisorctl(path.join(before, 'conf'))('avail');
  const running = status
    .split('\n')
    .map((line) => line.split(/\s+/)[0])
    .filter(Boolean);
  const then = snapshot(before);
  const changed = changedFiles(then, snapshot(stackDir));
  const { steps, unapplied } = planReload({ changed, sectionsBefore, sectionsAfter, running });
  if (!steps.length) process.stdout.write('nothing to reload: every program runs its current config\n');
  let vcl = '';
  try {
    vcl = check(steps, dirs, sectionsAfter);
  } catch (err) {
    restore(before, then, stackDir, changed);
    process.stderr.write(
      `${/** @type {Error} */ (err).message}\nnothing was reloaded: every program runs, and its files hold, the config it had\n`,
    );
    process.exit(1);
  }
  for (const step of steps) {
    const restarted = step.action === 'restart' || step.action === 'handover';
    process.stdout.write(`${step.program}: ${restarted ? 'restarted' : 'reloaded'} (${step.why})\n`);
    await apply(step, dirs, vcl);
  }
  for (const file of unapplied) process.stdout.write(`${file} changed: taken at the next up\n`);
}

if (import.meta.main) {
  main().catch((err) => {
    process.stderr.write(`${process.argv[2] === '--restart' ? 'restart' : 'reload'}: ${err.message}\n`);
    process.exit(2);
  });
}
