import fs from 'node:fs';
import { flushCompileCache } from 'node:module';
import { loadConfig } from './config.js';
import { StartupError } from './errors.js';
import { drainable } from './health.js';
import { removeStaleSocket } from './hold-socket.js';
import { createLogger } from './log.js';
import { client, createRegistry, serveMetrics } from './metrics.js';
import { checkRules } from './rules.js';

// a stop waits this long for the requests in flight (supervisord's stopwaitsecs are longer)
const STOP_WAIT_MS = 8000;
/** How long a connection that has asked nothing yet is left to ask when a stop closes the idle ones. */
const IDLE_MS = 200;

/**
 * @typedef {{ config: Record<string, any>, logger: import('pino').Logger, registry: import('prom-client').Registry }} ServiceContext
 * @typedef {{ app: import('node:http').RequestListener, close?: () => Promise<void>, handover?: () => Promise<void> }} ServiceParts
 *   handover: gives up at a held restart what one process at a time may hold (the origin's variant cache
 *   directory), so the next process starts while this one still answers its requests; close runs after it
 */

/**
 * Starts a service: validated config (exit 2 naming the bad variable or the broken rule, lib/src/rules.js; exit 1 on a build error marked
 * `startup`, in one log line), logger, metrics port, HTTP port,
 * and a graceful stop on SIGTERM/SIGINT: SHUTDOWN_DRAIN_S of serving with /healthz at 404 first (lib/src/health.js), then no new
 * connections, the requests in flight answered (STOP_WAIT_MS at most), the service's own close, exit 0. A second signal ends it at
 * once. On a socket held by lib/src/hold-socket.js, SIGHUP stops it the same way without the drain, and hands over
 * at once: once it no longer accepts and has given up its metrics port and what its `handover` releases, it tells
 * the holder ('released'), which lets the next process (its code already loaded: awaitTurn) go on while this
 * one answers what it took.
 * @param {{ name: string, settings: import('./config.js').Setting[], build: (ctx: ServiceContext) => Promise<ServiceParts> }} spec
 */
export async function runService(spec) {
  let config;
  try {
    config = loadConfig(spec.settings);
    checkRules(config);
  } catch (err) {
    process.stderr.write(`${spec.name}: ${/** @type {Error} */ (err).message}\n`);
    process.exit(2);
  }
  const prefix = spec.name.toUpperCase().replace(/-/g, '_');
  // taken before build() starts any process of its own
  const held = heldSocket();
  // the next process of a held restart: its code and settings are loaded, the old one still serves
  await awaitTurn();
  const logger = createLogger(spec.name, config.LOG_LEVEL);
  const registry = createRegistry(spec.name);
  survivePeerFaults(spec.name, logger, registry);
  const parts = await spec.build({ config, logger, registry }).catch(async (err) => {
    // a setting the service cannot work with (a wrong S3 key, a missing bucket): one line, exit 1
    if (!(err instanceof StartupError)) throw err;
    logger.fatal(`${spec.name} cannot start: ${err.message}`);
    await new Promise((resolve) => logger.flush(() => resolve(null)));
    process.exit(1);
  });
  const { createServer } = await import('node:http');
  let draining = false;
  const server = createServer(drainable(parts.app, () => draining));
  server.keepAliveTimeout = 65_000; // longer than haproxy's idle timeout, so haproxy closes first
  server.headersTimeout = 66_000;
  closeIdleGracefully(server);
  const socket = config[`${prefix}_SOCKET`];
  await (held !== null
    ? listenOnHeld(server, held)
    : socket
      ? listenOnSocket(server, socket)
      : listenOnPort(server, config[`${prefix}_PORT`], config[`${prefix}_HOST`]));
  const metricsServer = await serveMetrics(
    registry,
    config[`${prefix}_METRICS_PORT`],
    config[`${prefix}_HOST`],
    config.METRICS_PASSWORD,
  );
  logger.info(
    socket
      ? { socket, metricsPort: config[`${prefix}_METRICS_PORT`] }
      : { port: config[`${prefix}_PORT`], metricsPort: config[`${prefix}_METRICS_PORT`] },
    `${spec.name} listening`,
  );
  // what Node compiled to get here, for the next start, where the service's bin script turned on its compile
  // cache (NODE_COMPILE_CACHE, origin/bin/origin): written now, since a process that is killed never writes it
  flushCompileCache();
  let stopping = false;
  /**
   * @param {{ drain?: boolean, handover?: boolean }} [options] drain: false when the socket is held for the next
   * process; handover: that process may start before this one has answered its requests (a held restart)
   */
  const stop = async ({ drain = true, handover = false } = {}) => {
    if (stopping) {
      logger.warn('a second signal: exiting at once');
      logger.flush(() => process.exit(1));
      return;
    }
    stopping = true;
    const drainS = drain ? config.SHUTDOWN_DRAIN_S : 0;
    if (drainS > 0) {
      draining = true;
      logger.info({ drainS }, 'draining: health checks answer 404, requests are still served');
      await new Promise((resolve) => setTimeout(resolve, drainS * 1000));
    }
    logger.info('stopping');
    metricsServer.close();
    // (no new connection from here: server.close() is called at once)
    const finished = finishRequests(server, STOP_WAIT_MS);
    if (handover) await handOver(parts, logger);
    await finished;
    await parts.close?.();
    await new Promise((resolve) => logger.flush(() => resolve(null)));
    process.exit(0);
  };
  process.on('SIGTERM', () => stop());
  process.on('SIGINT', () => stop());
  if (held !== null) {
    // lib/src/hold-socket.js: SIGHUP is its restart (the next process takes the socket at once, no drain);
    // once the holder is gone (its channel closed, maybe while this one started), nothing would start this
    // service again: it stops
    process.on('SIGHUP', () => stop({ drain: false, handover: true }));
    process.on('disconnect', () => stop());
    if (process.connected) process.send?.('ready');
    else stop();
  }
  return { server, config, logger };
}

/**
 * Node's closeIdleConnections (which server.close() calls too) destroys a kept-alive connection whose last
 * response was ended but not yet written out: at a stop, a large variant to a reader slower than the origin
 * (its bytes still in Node's queue) was cut off mid-body, which no one sends again (seen in CI: a restart's
 * miss "terminated: other side closed"). Here an idle connection is closed once its responses are handed to
 * the kernel, and by a half-close (FIN), so the bytes in the kernel's buffer still reach the peer; a request
 * that crosses the FIN gets no answer, which haproxy sends again (retry-on empty-response).
 * @param {import('node:http').Server} server
 */
function closeIdleGracefully(server) {
  /** @type {Map<import('node:net').Socket, { responses: number, asked: boolean, accepted: number }>} by connection */
  const open = new Map();
  server.on('connection', (socket) => {
    open.set(socket, { responses: 0, asked: false, accepted: Date.now() });
    socket.once('close', () => open.delete(socket));
  });
  server.on('request', (req, res) => {
    const state = open.get(req.socket);
    if (!state) return;
    state.responses += 1;
    state.asked = true;
    res.once('close', () => (state.responses -= 1));
  });
  server.closeIdleConnections = () => {
    // a connection accepted a moment ago may carry a request not yet read: it is given IDLE_MS to ask
    const before = Date.now() - IDLE_MS;
    for (const [socket, { responses, asked, accepted }] of open)
      if (responses === 0 && (asked || accepted <= before) && socket.writableLength === 0 && !socket.writableEnded)
        socket.end();
  };
}

/**
 * At a held restart: the service's `handover`, then 'released' to the holder (lib/src/hold-socket.js), which
 * starts the next process now. A handover that fails says nothing: the next process starts when this one has
 * exited, as before (its variant cache, say, still held until then).
 * @param {ServiceParts} parts @param {import('pino').Logger} logger
 */
async function handOver(parts, logger) {
  try {
    await parts.handover?.();
  } catch (err) {
    logger.error({ err }, 'handover failed: the next process starts once this one has stopped');
    return;
  }
  if (process.connected) process.send?.('released');
}

/**
 * Stops listening and waits for the requests in flight to be answered, at most `ms` (a kept-alive connection is
 * closed once idle and written out: closeIdleGracefully); what is left is cut at exit (haproxy sends a GET
 * again).
 * @param {import('node:http').Server} server @param {number} ms
 */
async function finishRequests(server, ms) {
  const closed = new Promise((resolve) => server.close(() => resolve(null)));
  const idle = setInterval(() => server.closeIdleConnections(), 50);
  server.closeIdleConnections();
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
  clearInterval(idle);
}

/** @param {import('node:http').Server} server @param {number} port @param {string} host */
function listenOnPort(server, port, host) {
  return new Promise((resolve) => server.listen(port, host, () => resolve(null)));
}

/**
 * The listening socket handed over by lib/src/hold-socket.js (LISTEN_FD), or null. The variable is removed, so
 * no process this one starts takes it for its own.
 * @returns {number | null}
 */
function heldSocket() {
  const fd = process.env.LISTEN_FD;
  delete process.env.LISTEN_FD;
  return fd && process.send ? Number(fd) : null;
}

/**
 * The next process of a held restart (HOLD_SOCKET_PREPARE, lib/src/hold-socket.js) has loaded its code and its
 * settings while the old one still serves: it says 'prepared' and waits for 'go', which the holder sends once
 * the old one has stopped accepting and handed over; only then does it build (its caches, its ports) and
 * listen. A process whose code or settings fail to load never gets here, and the old one keeps serving. Any
 * other process goes on at once. The variable is removed, so no process this one starts takes it.
 */
function awaitTurn() {
  const prepare = process.env.HOLD_SOCKET_PREPARE === '1';
  delete process.env.HOLD_SOCKET_PREPARE;
  if (!prepare || !process.connected || !process.send) return Promise.resolve();
  return new Promise((resolve) => {
    // the holder gone while this one waits: nothing would start it, nothing is held yet
    const gone = () => process.exit(0);
    const go = (/** @type {unknown} */ message) => {
      if (message !== 'go') return;
      process.off('message', go);
      process.off('disconnect', gone);
      resolve(null);
    };
    process.on('message', go);
    process.once('disconnect', gone);
    process.send?.('prepared');
  });
}

/** @param {import('node:http').Server} server @param {number} fd */
function listenOnHeld(server, fd) {
  return new Promise((resolve) => server.listen({ fd }, () => resolve(null)));
}

/**
 * A Unix socket in place of a TCP port: who may connect is decided by its directory's owner and group (the
 * native render gives it to the service's user and the group of haproxy's, mode 0750), so the socket itself
 * is open to whoever reaches it. One left by a killed process is replaced.
 * @param {import('node:http').Server} server @param {string} socket
 */
async function listenOnSocket(server, socket) {
  removeStaleSocket(socket);
  await new Promise((resolve) => server.listen(socket, () => resolve(null)));
  fs.chmodSync(socket, 0o666);
}

/**
 * The last line of defence against what a peer can make a library throw outside any request's promise (#51:
 * an image host closing its connection while undici's parser was paused made undici 7.30 throw from a socket
 * event, and the process exited with every transform and upload in flight). An uncaught error raised inside
 * the HTTP client's code is logged and counted, and the process keeps serving: the request it belonged to
 * fails at its own deadline. Any other uncaught error still ends the process, as Node would.
 * @param {string} name @param {import('pino').Logger} logger @param {import('prom-client').Registry} registry
 */
export function survivePeerFaults(name, logger, registry) {
  const survived = new client.Counter({
    name: `${name.replace(/-/g, '_')}_survived_errors_total`,
    help: "Uncaught errors raised inside the HTTP client's code by a peer, logged and survived",
    registers: [registry],
  });
  process.on('uncaughtException', (err) => {
    const stack = String(/** @type {Error} */ (err)?.stack || '');
    if (/[\\/]node_modules[\\/]undici[\\/]lib[\\/]/.test(stack)) {
      survived.inc();
      logger.error(
        { err },
        'an error inside the HTTP client, survived: the request it belonged to fails at its deadline',
      );
      return;
    }
    logger.fatal({ err }, 'uncaught error');
    logger.flush(() => process.exit(1));
    setTimeout(() => process.exit(1), 1000).unref();
  });
}
