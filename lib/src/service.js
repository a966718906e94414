import { loadConfig } from './config.js';
import { StartupError } from './errors.js';
import { createLogger } from './log.js';
import { createRegistry, serveMetrics } from './metrics.js';
import { checkRules } from './rules.js';

/**
 * @typedef {{ config: Record<string, any>, logger: import('pino').Logger, registry: import('prom-client').Registry }} ServiceContext
 * @typedef {{ app: import('node:http').RequestListener, close?: () => Promise<void> }} ServiceParts
 */

/**
 * Starts a service: validated config (exit 2 naming the bad variable or the broken rule, lib/src/rules.js; exit 1 on a build error marked
 * `startup`, in one log line), logger, metrics port, HTTP port,
 * and a graceful stop on SIGTERM/SIGINT.
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
  const logger = createLogger(spec.name, config.LOG_LEVEL);
  const registry = createRegistry(spec.name);
  const parts = await spec.build({ config, logger, registry }).catch(async (err) => {
    // a setting the service cannot work with (a wrong S3 key, a missing bucket): one line, exit 1
    if (!(err instanceof StartupError)) throw err;
    logger.fatal(`${spec.name} cannot start: ${err.message}`);
    await new Promise((resolve) => logger.flush(() => resolve(null)));
    process.exit(1);
  });
  const { createServer } = await import('node:http');
  const server = createServer(parts.app);
  server.keepAliveTimeout = 65_000; // longer than haproxy's idle timeout, so haproxy closes first
  server.headersTimeout = 66_000;
  await new Promise((resolve) =>
    server.listen(config[`${prefix}_PORT`], config[`${prefix}_HOST`], () => resolve(null)),
  );
  const metricsServer = await serveMetrics(registry, config[`${prefix}_METRICS_PORT`], config[`${prefix}_HOST`]);
  logger.info(
    { port: config[`${prefix}_PORT`], metricsPort: config[`${prefix}_METRICS_PORT`] },
    `${spec.name} listening`,
  );
  const stop = async () => {
    logger.info('stopping');
    server.close();
    metricsServer.close();
    server.closeIdleConnections();
    await parts.close?.();
    await new Promise((resolve) => logger.flush(() => resolve(null)));
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return { server, config, logger };
}
