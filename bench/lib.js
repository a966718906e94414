// What every benchmark shares: the machine it ran on, percentiles, a closed-loop load driver,
// RSS sampling of a process, and the report (Markdown for people, JSON for tools).
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import { processTree } from '../lib/src/process-tree.js';

export { processTree };

export const REPORTS = path.join(import.meta.dirname, 'reports');

/** @param {string} command @param {string[]} args */
function version(command, args) {
  // nginx and varnishd print their version on stderr
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error) return 'not found';
  return `${result.stdout}${result.stderr}`.trim().split('\n')[0].trim();
}

export async function machine() {
  const sharp = (await import('sharp')).default;
  return {
    cpu: os.cpus()[0]?.model,
    cores: os.availableParallelism(),
    memory_gib: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    sharp: sharp.versions.sharp,
    libvips: sharp.versions.vips,
    nginx: version('nginx', ['-v']),
    varnish: version('varnishd', ['-V']),
    haproxy: version('haproxy', ['-v']),
    redis: version('redis-server', ['--version']),
  };
}

/**
 * The filesystem `dir` is on, and for ext4 whether it has a journal: without one, ext4 passes over every
 * inode freed in the last 1–6 minutes each time it makes a file, so a service that writes a file per
 * answer runs slower after another process deleted many files (kernel: recently_deleted in ialloc.c).
 * @param {string} dir
 */
export function filesystem(dir) {
  const found = spawnSync('findmnt', ['-n', '-o', 'FSTYPE,SOURCE', '-T', dir], { encoding: 'utf8' });
  const [type = 'unknown', source = ''] = (found.stdout || '').trim().split(/\s+/);
  if (type !== 'ext4') return { dir, type, source };
  // jbd2 names a journal after the kernel's device name (/dev/mapper/vg-root is dm-0 there)
  const device = path.basename(fs.existsSync(source) ? fs.realpathSync(source) : source);
  const journal =
    fs.existsSync('/proc/fs/jbd2') && fs.readdirSync('/proc/fs/jbd2').some((name) => name.startsWith(`${device}-`));
  return { dir, type, source, journal };
}

/**
 * CPU time (user + system, every thread) the processes have used since they started, in ms.
 * @param {number[]} pids
 */
export function cpuMs(pids) {
  return pids.reduce((sum, pid) => sum + statCpuMs(`/proc/${pid}/stat`), 0);
}

/**
 * CPU ms (utime + stime) a /proc stat file counts (a process's, or one thread's under task/); 0 when it ended.
 * @param {string} file
 */
export function statCpuMs(file) {
  try {
    const stat = fs.readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

export const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/**
 * CPU ms of a process, its live descendants (the origin's transform workers: processTree) and the children
 * that ended (their time is the parent's cutime and cstime). @param {number} pid
 */
export function processTreeCpuMs(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const own = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return cpuMs(processTree(pid)) + ((Number(own[13]) + Number(own[14])) * 1000) / CLOCK_TICKS;
}

/** The share of the machine's CPU time spent idle over the next `ms`. @param {number} ms */
export async function idleShare(ms = 1000) {
  const sample = () => fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const before = sample();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const after = sample();
  const spent = after.map((value, i) => value - before[i]);
  const total = spent.reduce((sum, value) => sum + value, 0);
  return total ? (spent[3] + spent[4]) / total : 1; // idle + iowait
}

/** Until the machine is quiet (at least `share` of its CPU idle over a second), at most `maxMs`. @param {number} share @param {number} maxMs */
export async function quiet(share = 0.7, maxMs = 60_000) {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline && (await idleShare()) < share);
}

/** @param {number[]} values @param {number} q */
export function percentile(values, q) {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

/** min / median / max of repeated runs. @param {number[]} values */
export function spread(values) {
  return { min: Math.min(...values), median: percentile(values, 0.5), max: Math.max(...values) };
}

/** min / median / max of `values` as a report's cell, two decimals. @param {number[]} values */
export function spreadText(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[0].toFixed(2)} / ${percentile(sorted, 0.5).toFixed(2)} / ${sorted[sorted.length - 1].toFixed(2)}`;
}

/**
 * Closed-loop load: `concurrency` workers each send the next request as soon as the last answered.
 * @param {{ origin: string, paths: string[], concurrency: number, headers?: Record<string, string> }} options
 */
export async function drive({ origin, paths, concurrency, headers = {} }) {
  const pool = new Pool(origin, { connections: concurrency, pipelining: 1 });
  const latencies = [];
  /** @type {Record<string, number>} */
  const statuses = {};
  let next = 0;
  let bytes = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < paths.length) {
        const requestPath = paths[next++];
        const sent = performance.now();
        const response = await pool.request({ method: 'GET', path: requestPath, headers });
        for await (const chunk of response.body) bytes += chunk.length;
        latencies.push(performance.now() - sent);
        statuses[response.statusCode] = (statuses[response.statusCode] || 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return {
    requests: paths.length,
    seconds,
    rps: paths.length / seconds,
    p50_ms: percentile(latencies, 0.5),
    p99_ms: percentile(latencies, 0.99),
    bytes,
    statuses,
    latencies,
  };
}

/** A process's resident memory with its children's (the origin's transform workers), in MB. @param {number} pid */
export function treeRssMb(pid) {
  let pages = 0;
  for (const id of processTree(pid)) {
    try {
      pages += Number(fs.readFileSync(`/proc/${id}/statm`, 'utf8').split(' ')[1]);
    } catch {
      // gone
    }
  }
  return (pages * 4096) / 2 ** 20;
}

/**
 * A process tree's proportional set size in MB: each page shared between its processes (Node's and libvips'
 * code in every worker) counted once in all, as a container's memory counts it, where the RSS of each
 * counts it in each. @param {number} pid
 */
export function treePssMb(pid) {
  let kb = 0;
  for (const id of processTree(pid)) {
    try {
      kb += Number(/^Pss:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${id}/smaps_rollup`, 'utf8'))?.[1] || 0);
    } catch {
      // gone
    }
  }
  return kb / 1024;
}

/**
 * Samples a process's resident memory with its children's (treeRssMb: the origin's transform workers, which
 * make its AVIFs and large variants) until stopped; returns the peak in MB. Before 2026-11-27 the process alone
 * was read: reports from before then give the origin's main process only. With `pss`, `peakPss()` is the peak
 * of the tree's PSS (treePssMb), read every 200 ms (smaps_rollup walks every mapping: dearer than statm, so
 * only where it is reported).
 * @param {number} pid @param {{ pss?: boolean }} [options]
 */
export function sampleRss(pid, { pss = false } = {}) {
  let peak = 0;
  let peakPss = 0;
  const read = () => {
    peak = Math.max(peak, treeRssMb(pid));
  };
  const readPss = () => {
    if (pss) peakPss = Math.max(peakPss, treePssMb(pid));
  };
  read();
  readPss();
  const start = Math.round(peak);
  const timer = setInterval(read, 20);
  const pssTimer = pss ? setInterval(readPss, 200) : undefined;
  return {
    start,
    stop: () => {
      clearInterval(timer);
      clearInterval(pssTimer);
      read();
      readPss();
      return Math.round(peak);
    },
    /** the peak PSS in MB, after stop() (0 without `pss`) */
    peakPss: () => Math.round(peakPss),
    reset: () => {
      peak = 0;
      peakPss = 0;
    },
  };
}

/**
 * Runs wrk and parses its summary. wrk runs in a session of its own (setsid): Linux schedules each session as
 * one group, so wrk and the stack each get half of the CPU, like a client machine and a server machine,
 * whatever the number of threads on either side. `sharedSession` runs it in this process's session instead,
 * the stack's (./infra/stack up keeps supervisord in its caller's session): one scheduling group, where the
 * CPU is shared thread by thread, without the group time slices that add to the latency of each side.
 * `scriptArgs` reach the script's init(args).
 * @param {WrkOptions} options
 */
export function wrk(options) {
  const command = wrkCommand(options);
  return wrkSummary(command, execFileSync(command[0], command.slice(1), { encoding: 'utf8' }));
}

/**
 * A report's row for repeated wrk runs of one path: req/s and p99 as min / median / max, the median p50, the
 * non-2xx answers of all runs together. @param {string} name @param {Array<ReturnType<typeof wrk>>} runs
 */
export function wrkRow(name, runs) {
  const rps = spread(runs.map((run) => run.rps));
  const p99 = spread(runs.map((run) => run.p99_ms));
  return [
    name,
    `${Math.round(rps.min)} / ${Math.round(rps.median)} / ${Math.round(rps.max)}`,
    spread(runs.map((run) => run.p50_ms)).median,
    `${p99.min} / ${p99.median} / ${p99.max}`,
    runs.reduce((sum, run) => sum + run.non2xx, 0),
  ];
}

/** `wrk` without blocking this process: several at once. @param {WrkOptions} options */
export async function wrkAsync(options) {
  const command = wrkCommand(options);
  const { stdout } = await promisify(execFile)(command[0], command.slice(1), { encoding: 'utf8' });
  return wrkSummary(command, stdout);
}

/**
 * @typedef {{ url: string, connections: number, seconds: number, threads?: number, script?: string, scriptArgs?: string[], sharedSession?: boolean, cpus?: string, timeoutS?: number }} WrkOptions
 *   cpus: the CPUs wrk is pinned to (taskset -c), away from the server's; timeoutS: a request's (wrk's 2 s by default)
 * @param {WrkOptions} options
 */
function wrkCommand({
  url,
  connections,
  seconds,
  threads = 2,
  script,
  scriptArgs = [],
  sharedSession = false,
  cpus,
  timeoutS,
}) {
  const args = [
    ...(timeoutS ? ['--timeout', `${timeoutS}s`] : []),
    '-t',
    String(threads),
    '-c',
    String(connections),
    '-d',
    `${seconds}s`,
    '--latency',
    ...(script ? ['-s', script] : []),
    url,
    ...(scriptArgs.length ? ['--', ...scriptArgs] : []),
  ];
  const pinned = cpus ? ['taskset', '-c', cpus, 'wrk'] : ['wrk'];
  return sharedSession ? [...pinned, ...args] : ['setsid', '--wait', ...pinned, ...args];
}

/** @param {string[]} command @param {string} out */
function wrkSummary(command, out) {
  const unit = (/** @type {string} */ text) => {
    const match = /([\d.]+)(us|ms|s)/.exec(text);
    if (!match) return NaN;
    return Number(match[1]) * { us: 0.001, ms: 1, s: 1000 }[/** @type {'us'|'ms'|'s'} */ (match[2])];
  };
  const line = (/** @type {string} */ name) => (new RegExp(`^\\s+${name}\\s+(\\S+)`, 'm').exec(out) || [])[1] || '';
  const non2xx = Number((/Non-2xx or 3xx responses: (\d+)/.exec(out) || [])[1] || 0);
  const errors = (/Socket errors: (.*)/.exec(out) || [])[1] || 'none';
  const [, requests, read] = /(\d+) requests in [\d.]+\w+, ([\d.]+\w+) read/.exec(out) || [];
  return {
    command: command.join(' '),
    rps: Number((/Requests\/sec:\s+([\d.]+)/.exec(out) || [])[1]),
    p50_ms: unit(line('50%')),
    p99_ms: unit(line('99%')),
    non2xx,
    errors,
    requests: Number(requests || 0),
    bytes: bytesOf(read || '0B'),
  };
}

/** wrk's sizes ("6.20MB", "512.00KB") in bytes. @param {string} text */
function bytesOf(text) {
  const [, number, unit] = /([\d.]+)(\w+)/.exec(text) || ['', '0', 'B'];
  return Number(number) * ({ B: 1, KB: 2 ** 10, MB: 2 ** 20, GB: 2 ** 30 }[unit] || 1);
}

/** The BENCH_* settings of this run as a command line writes them, for a report's command. */
export const benchSettings = () =>
  Object.entries(process.env)
    .filter(([key]) => key.startsWith('BENCH_'))
    .map(([key, value]) => `${key}='${value}' `)
    .join('');

/**
 * Writes bench/reports/<date>-<name>.md and .json.
 * @param {string} name @param {{ title: string, command: string, machine: any, sections: Array<{ heading: string, text?: string, table?: { columns: string[], rows: Array<Array<string | number>> } }>, data: any }} report
 */
export function writeReport(name, report) {
  fs.mkdirSync(REPORTS, { recursive: true });
  const date = new Date().toISOString().slice(0, 10);
  const lines = [
    `# ${report.title}`,
    '',
    `Run ${new Date().toISOString()} with \`${report.command}\`.`,
    '',
    '## Machine',
    '',
    '```',
    JSON.stringify(report.machine, null, 2),
    '```',
    '',
  ];
  for (const section of report.sections) {
    lines.push(`## ${section.heading}`, '');
    if (section.text) lines.push(section.text, '');
    if (section.table) {
      lines.push(`| ${section.table.columns.join(' | ')} |`, `|${section.table.columns.map(() => '---').join('|')}|`);
      for (const row of section.table.rows)
        lines.push(`| ${row.map((cell) => (typeof cell === 'number' ? round(cell) : cell)).join(' | ')} |`);
      lines.push('');
    }
  }
  const base = path.join(REPORTS, `${date}-${name}`);
  fs.writeFileSync(`${base}.md`, lines.join('\n'));
  fs.writeFileSync(
    `${base}.json`,
    `${JSON.stringify({ ...report, date }, (key, value) => (key === 'latencies' ? undefined : value), 2)}\n`,
  );
  return `${base}.md`;
}

/** @param {number} value */
export function round(value) {
  if (!Number.isFinite(value)) return String(value);
  return Math.abs(value) >= 100 ? Math.round(value) : Math.round(value * 100) / 100;
}
