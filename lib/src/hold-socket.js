// hold-socket [--stop-wait-s S] SOCKET COMMAND [ARG…]: runs a service that listens on the Unix socket SOCKET
// while this process holds the socket itself, so the service can stop and start again without a connection
// being refused.
//
// On one box haproxy reaches the origin and the avatar resolver over a Unix socket; a restart (a crash, a new
// setting, new code) used to leave no socket for the moment between the old process's exit and the new one's
// listen, and haproxy answered the misses of that moment with 503s (its retries of a refused Unix socket are
// immediate). Here the socket is bound once, by this process, and handed to each service process it starts
// (fd 3, LISTEN_FD=3; lib/src/service.js listens on it): while none accepts, connections wait in the socket's
// backlog and the next process takes them. The same idea as systemd's socket activation and nginx's binary
// upgrade, for a program supervisord runs.
//
// SIGHUP: the service is started again (its settings file read again, its code loaded again): the next process
// starts first and loads its code and settings while the running one still serves, then says 'prepared'
// (lib/src/service.js); the running one then stops accepting at once, without its drain, and says 'released'
// once it has given up what one process at a time may hold; the next one goes on then ('go': it builds and
// listens), while the old one answers the requests it took (killed if it has not stopped within
// --stop-wait-s, 15 s). The gap is the next one's build, not its whole start. A next process that exits
// before it has loaded (new code that does not load, a setting it refuses) or does not load within 60 s is
// given up, and the running one keeps serving: a restart that cannot work takes nothing down. One that stops
// without saying 'released' is followed when it has exited, and so is a next one that exits before it
// listens while the old one runs (it may have needed what the old one held). SIGTERM/SIGINT: passed on; this
// process exits with the service, once the old ones of a restart have finished too. A service that exits by
// itself after it was listening (killed, out of memory) is started again at once; one that exits before (a
// bad setting), or a fifth time in a minute, ends this process with its code, and supervisord's own retries
// and back-off take over. The service stops by itself if this process dies (its IPC channel closes).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import util from 'node:util';
import { createLogger } from './log.js';
import { childPids, newest } from './process-tree.js';

/** Restarts allowed in RESTART_WINDOW_MS before the crashes are left to supervisord. */
const MAX_RESTARTS = 4;
const RESTART_WINDOW_MS = 60_000;

/**
 * Makes way for a Unix socket at `file`: one left there by a killed process is removed; any other file is
 * kept, so that a setting naming it fails on bind (EADDRINUSE) and never deletes it. @param {string} file
 */
export function removeStaleSocket(file) {
  if (fs.statSync(file, { throwIfNoEntry: false })?.isSocket()) fs.rmSync(file);
}

/**
 * A Unix socket bound at `file` and not listening: the service's first listen() makes it listen, and it keeps
 * listening (its backlog open) as long as this process holds it. A socket left by a killed process is
 * replaced; any other file is not (the bind fails).
 * @param {string} file @returns {{ fd: number, close: () => void }}
 */
export function bindSocket(file) {
  removeStaleSocket(file);
  // net's own bind-only handle (what cluster's primary shares with its workers): a net.Server would accept
  const handle = /** @type {any} */ (net)._createServerHandle(file, -1, -1);
  if (typeof handle === 'number') throw new Error(`cannot bind ${file}: ${util.getSystemErrorName(handle)}`);
  // who may connect is decided by the socket's directory (lib/src/service.js)
  fs.chmodSync(file, 0o666);
  return handle;
}

/**
 * The pid of the process doing a program's work: the service a holder runs where `pid` is a holder (its newest
 * child: the old one of a restart may still be answering its last requests, and the next one may still be
 * loading, the old one serving meanwhile; 0 between two), else `pid` itself.
 * @param {number} pid @returns {number}
 */
export function servicePid(pid) {
  if (!pid || !fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('hold-socket')) return pid;
  return newest(childPids(pid)) ?? 0;
}

/**
 * Holds `socket` and runs the service `command` on it, as the header says. stopWaitS: how long a service
 * asked to restart may take to stop before it is killed (as supervisord's stopwaitsecs for a stop);
 * prepareWaitS: how long the next process of a restart may take to load before it is given up.
 * @param {{ socket: string, command: string, args: string[], logger: import('pino').Logger, exit: (code: number) => void, stopWaitS: number, prepareWaitS?: number }} options
 */
export function holdSocket({ socket, command, args, logger, exit, stopWaitS, prepareWaitS = 60 }) {
  const handle = bindSocket(socket);
  /** the service: serving, or starting to @type {import('node:child_process').ChildProcess | null} */
  let child = null;
  let ready = false;
  /** the next process of a restart, loading its code while `child` still serves @type {import('node:child_process').ChildProcess | null} */
  let next = null;
  /** `next` has loaded (said 'prepared') and waits for its turn */
  let nextPrepared = false;
  let stopping = false;
  /** `child` was told to stop for a restart (SIGHUP) */
  let restarting = false;
  let restartWhenReady = false;
  /** @type {number[]} */
  let crashes = [];
  /** services of earlier restarts still answering what they took @type {Set<import('node:child_process').ChildProcess>} */
  const leaving = new Set();
  /** the exit code of a stop, once the service has exited @type {number | null} */
  let stopCode = null;
  /** the next service exited before it listened while an old one still ran: it starts again once they are gone */
  let startWhenAlone = false;

  const finish = (/** @type {number} */ code) => {
    handle.close();
    exit(code);
  };
  // a stop ends this process once the service and every old one have exited (an old one's channel would close)
  const finishWhenAlone = () => {
    if (stopCode !== null && !child && !next && leaving.size === 0) finish(stopCode);
  };
  /** A service process; `prepare`: it loads, says 'prepared' and waits for 'go' (lib/src/service.js). @param {boolean} prepare */
  const spawnService = (prepare) => {
    const started = spawn(command, args, {
      stdio: ['inherit', 'inherit', 'inherit', handle.fd, 'ipc'],
      env: { ...process.env, LISTEN_FD: '3', ...(prepare ? { HOLD_SOCKET_PREPARE: '1' } : {}) },
    });
    started.on('message', (message) => {
      if (message === 'released') return released(started);
      if (message === 'prepared') return prepared(started);
      if (message !== 'ready' || started !== child) return;
      ready = true;
      logger.info({ pid: started.pid, socket }, 'service listening on the held socket');
      if (restartWhenReady) restart();
    });
    started.on('error', (err) => {
      logger.fatal({ err }, `cannot start ${command}`);
      finish(1);
    });
    started.on('exit', (code, signal) => exited(started, code, signal));
    return started;
  };
  const start = () => {
    ready = false;
    child = spawnService(false);
  };
  // the next process, loaded, takes the old one's place: it builds and listens now
  const takeOver = () => {
    const taking = /** @type {import('node:child_process').ChildProcess} */ (next);
    next = null;
    nextPrepared = false;
    ready = false;
    child = taking;
    if (taking.connected) taking.send('go');
  };
  // the old one stops accepting (SIGHUP, lib/src/service.js); one that does not stop (hung, stopped) would
  // hold every request waiting in the backlog: killed
  const tellToStop = (/** @type {import('node:child_process').ChildProcess} */ old) => {
    restarting = true;
    old.kill('SIGHUP');
    setTimeout(() => {
      if ((old !== child && !leaving.has(old)) || old.exitCode !== null || old.signalCode !== null) return;
      logger.error({ pid: old.pid, stopWaitS }, 'service did not stop for its restart: killed');
      old.kill('SIGKILL');
    }, stopWaitS * 1000).unref();
  };
  const prepared = (/** @type {import('node:child_process').ChildProcess} */ started) => {
    if (started !== next) return;
    nextPrepared = true;
    if (!child) return takeOver(); // the old one exited while this one loaded
    if (!restarting) tellToStop(child);
  };
  // a next process that exits before it took over (its new code or settings failed to load, it was given
  // up): the running one keeps serving, and the restart is not done
  const nextExited = (
    /** @type {import('node:child_process').ChildProcess} */ gone,
    /** @type {number | null} */ code,
    /** @type {NodeJS.Signals | null} */ signal,
  ) => {
    next = null;
    nextPrepared = false;
    if (stopping) return finishWhenAlone();
    if (!child) return start(); // nothing serves (the old one gone meanwhile): as after a crash
    if (restarting) {
      // the old one is stopping already: another one starts once it has released or exited
      logger.error({ pid: gone.pid, code, signal }, 'the next process exited after it loaded: starting another');
      return;
    }
    logger.error(
      { pid: gone.pid, code, signal },
      'the next process exited before it took over: the running one keeps serving (the restart was not done)',
    );
    if (restartWhenReady && ready) restart();
  };
  const exited = (
    /** @type {import('node:child_process').ChildProcess} */ gone,
    /** @type {number | null} */ code,
    /** @type {NodeJS.Signals | null} */ signal,
  ) => {
    if (gone === next) return nextExited(gone, code, signal);
    if (gone !== child) {
      leaving.delete(gone);
      logger.info({ pid: gone.pid, code, signal }, 'the old process of a restart has exited');
      if (startWhenAlone && leaving.size === 0 && !stopping) {
        startWhenAlone = false;
        start();
      }
      return finishWhenAlone();
    }
    const wasReady = ready;
    child = null;
    if (stopping) {
      stopCode = code ?? 0;
      return finishWhenAlone();
    }
    // a restart under way: the next process takes over (once it has loaded)
    if (next) {
      restarting = false;
      logger.info({ pid: gone.pid, code, signal }, 'service exited during a restart: the next one takes over');
      if (nextPrepared) takeOver();
      return;
    }
    // it may have needed what the old one still held (a service that hands over less than it should)
    if (!wasReady && leaving.size > 0) {
      logger.warn(
        { pid: gone.pid, code, signal },
        'service exited before it listened while the old one still runs: started again once that has exited',
      );
      startWhenAlone = true;
      return;
    }
    if (restarting) {
      restarting = false;
      logger.info({ pid: gone.pid, code, signal }, 'service stopped for a restart; starting it again');
      return start();
    }
    const now = Date.now();
    crashes = [...crashes.filter((at) => now - at < RESTART_WINDOW_MS), now];
    if (!wasReady || crashes.length > MAX_RESTARTS) {
      logger.fatal(
        { pid: gone.pid, code, signal, restarts: crashes.length - 1 },
        wasReady ? 'service exited again: left to supervisord' : 'service exited before it listened',
      );
      return finish(code || 1);
    }
    logger.error(
      { pid: gone.pid, code, signal },
      'service exited; starting it again (its socket held: requests wait for it)',
    );
    start();
  };
  // the service asked to restart no longer accepts and holds nothing the next one needs: the next goes on now
  const released = (/** @type {import('node:child_process').ChildProcess} */ old) => {
    if (old !== child || !restarting) return;
    restarting = false;
    leaving.add(old);
    child = null;
    logger.info({ pid: old.pid }, 'service released its socket for a restart; the next one takes over');
    if (stopping) {
      stopCode = 0;
      return finishWhenAlone();
    }
    if (next && nextPrepared) takeOver();
    else if (!next) start();
  };
  // the next process loads first, while this one serves; this one is told to stop once that one has loaded
  const restart = () => {
    restartWhenReady = false;
    if (stopping) return;
    if (restarting || next || !child || !ready) {
      restartWhenReady = true; // one starting now may have read the old settings
      return;
    }
    const loading = spawnService(true);
    next = loading;
    nextPrepared = false;
    setTimeout(() => {
      if (loading !== next || nextPrepared) return;
      logger.error({ pid: loading.pid, prepareWaitS }, 'the next process did not load in time: given up');
      loading.kill('SIGKILL');
    }, prepareWaitS * 1000).unref();
  };
  // (an old one of a restart is stopping already: it is left to finish; a next one still loading is stopped)
  const stop = (/** @type {NodeJS.Signals} */ signal) => {
    stopping = true;
    next?.kill(signal);
    if (child) child.kill(signal);
    else {
      stopCode = 0;
      finishWhenAlone();
    }
  };
  process.on('SIGHUP', restart);
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  start();
}

if (import.meta.main) {
  const options = process.argv.slice(2);
  let stopWaitS = 15;
  if (options[0] === '--stop-wait-s') stopWaitS = Number(options.splice(0, 2)[1]);
  const [socket, command, ...args] = options;
  if (!socket || !command || !(stopWaitS > 0)) {
    process.stderr.write('usage: hold-socket [--stop-wait-s SECONDS] SOCKET COMMAND [ARG…]\n');
    process.exit(2);
  }
  const logger = createLogger('hold-socket', process.env.LOG_LEVEL || 'info');
  try {
    holdSocket({
      socket,
      command,
      args,
      logger,
      exit: (code) => logger.flush(() => process.exit(code)),
      stopWaitS,
    });
  } catch (err) {
    process.stderr.write(`hold-socket: ${/** @type {Error} */ (err).message}\n`);
    process.exit(1);
  }
}
