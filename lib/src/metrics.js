import http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import client from 'prom-client';

/** A registry with the default process metrics, labelled by service. @param {string} service */
export function createRegistry(service) {
  const registry = new client.Registry();
  registry.setDefaultLabels({ service });
  client.collectDefaultMetrics({ register: registry });
  return registry;
}

/** The user name of the metrics ports and of Prometheus (HTTP basic auth). */
export const METRICS_USER = 'metrics';

/** Whether `header` (an Authorization) carries the metrics user and `password`. @param {string | undefined} header @param {string} password */
export function metricsAuthorized(header, password) {
  const expected = Buffer.from(`Basic ${Buffer.from(`${METRICS_USER}:${password}`).toString('base64')}`);
  const given = Buffer.from(String(header || ''));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * The metrics port: a plain HTTP server answering /metrics, kept off the public path, and behind the metrics
 * password where there is one (any local user reaches a loopback port; #51).
 * @param {client.Registry} registry @param {number} port @param {string} host @param {string} [password]
 * @returns {Promise<http.Server>}
 */
export function serveMetrics(registry, port, host, password = '') {
  const server = http.createServer(async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    if (password && !metricsAuthorized(req.headers.authorization, password)) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="metrics"' }).end();
      return;
    }
    res.setHeader('Content-Type', registry.contentType);
    res.end(await registry.metrics());
  });
  return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
}

/** Request duration histogram by route and status, as middleware. @param {client.Registry} registry */
export function requestMetrics(registry) {
  const duration = new client.Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time to answer a request, by route and status',
    labelNames: ['route', 'status'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  /** @param {import('express').Request} _req @param {import('express').Response} res @param {import('express').NextFunction} next */
  const middleware = (_req, res, next) => {
    const end = duration.startTimer();
    res.on('finish', () => end({ route: res.locals.route || 'other', status: String(res.statusCode) }));
    next();
  };
  /** The same histogram for a handler outside Express. @param {string} route @param {number} status @param {number} started performance.now() */
  const observe = (route, status, started) =>
    duration.observe({ route, status: String(status) }, (performance.now() - started) / 1000);
  return Object.assign(middleware, { observe });
}

export { client };
