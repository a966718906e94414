// Rules between settings, declared once: each field's own checks are in its declaration (type, min, max,
// choices); these are the ones that name two or more settings, such as the layered timeouts (each layer
// answers before the one outside it gives up). Checked at render (every setting known: infra/resolve.js)
// and at each service's start-up (the rules whose settings are all the service's: lib/src/service.js).
import { usableCores } from './cores.js';

/**
 * @typedef {{ names: string[], holds: (config: Record<string, any>) => boolean, why: string }} Rule
 */

/** The transform slots an origin has: TRANSFORM_CONCURRENCY, or 2 × the cores it may use (cores.js) when it is 0. @param {Record<string, any>} config */
export const transformSlots = (config) => config.TRANSFORM_CONCURRENCY || usableCores() * 2;

/**
 * Transforms that may wait for a slot before an immediate 503: TRANSFORM_QUEUE_MAX, or sixteen for each slot when
 * it is 0 (64 on 2 cores, where bench/overload measured it): the same wait in time on any machine, where a fixed
 * 64 waiting would be half a second of work on 2 cores and a sixth of one on 16. @param {Record<string, any>} config
 * @param {number} [slots]
 */
export const transformQueueMax = (config, slots = transformSlots(config)) => config.TRANSFORM_QUEUE_MAX || 16 * slots;

/**
 * The queue depth from which an AVIF is made as the cheaper WebP: TRANSFORM_DEGRADE_DEPTH, or two for each slot
 * when it is 0 (8 on 2 cores). @param {Record<string, any>} config @param {number} [slots]
 */
export const degradeDepth = (config, slots = transformSlots(config)) => config.TRANSFORM_DEGRADE_DEPTH || 2 * slots;

/**
 * The transform worker processes an origin has at once (AVIFs, HEIC sources, large variants): TRANSFORM_WORKERS,
 * or one a core it may use when it is 0 (an AVIF keeps its core busy; one a slot cost 60 % more memory for no
 * more AVIFs a second, bench/scale 2026-11-27). @param {Record<string, any>} config
 */
export const transformWorkers = (config) => config.TRANSFORM_WORKERS || usableCores();

/**
 * The AVIF encodes behind first answers that run at once, on idle capacity: BACKGROUND_ENCODES, or half the
 * cores the origin may use, at least one, when it is 0 (one on the 2 cores it was tuned on: the same share of
 * a bigger machine). @param {Record<string, any>} config @param {number} [cores]
 */
export const backgroundEncodes = (config, cores = usableCores()) =>
  config.BACKGROUND_ENCODES || Math.max(1, Math.floor(cores / 2));

/**
 * The warmer's transforms an origin runs at once, each on one thread at the lowest priority (its warm lane):
 * WARM_TRANSFORMS, or a quarter of the cores it may use, at least one, when it is 0 (one on 2 cores, where
 * bench/day measured the warmer; four on 16). What there is to warm is Hive's posts, the same for every
 * operator; a bigger machine has more idle cores to make them on, and each warm transform holds a worker
 * process of its own. @param {Record<string, any>} config @param {number} [cores]
 */
export const warmTransforms = (config, cores = usableCores()) =>
  config.WARM_TRANSFORMS || Math.max(1, Math.floor(cores / 4));

/**
 * The warmer's transforms that may wait in an origin's warm lane: WARM_QUEUE_MAX, or two for each of its warm
 * transforms, at least 8, when it is 0 (the warmer sends two for each: none turned away while the lane keeps up).
 * @param {Record<string, any>} config @param {number} [cores]
 */
export const warmQueueMax = (config, cores = usableCores()) =>
  config.WARM_QUEUE_MAX || Math.max(8, 2 * warmTransforms(config, cores));

/**
 * The images the warmer asks for at once: WARM_CONCURRENCY, or two for each warm transform of the origins when
 * it is 0 (one fetching its original while the other is made: two for the one of a 2-core origin). The purge
 * service derives it from its own cores where nothing else told it (one machine: the origin's); the render
 * (infra/resolve.js) from the origins' count. @param {Record<string, any>} config @param {number} [cores]
 * @param {number} [origins]
 */
export const warmConcurrency = (config, cores = usableCores(), origins = 1) =>
  config.WARM_CONCURRENCY || 2 * warmTransforms(config, cores) * origins;

/** @type {Rule[]} */
export const RULES = [
  {
    names: ['REQUEST_TIMEOUT_S', 'HAPROXY_SERVER_TIMEOUT_S'],
    holds: (c) => c.REQUEST_TIMEOUT_S < c.HAPROXY_SERVER_TIMEOUT_S,
    why: 'the origin must answer a slow miss (a JSON 503 request_timeout, the work going on) before haproxy gives up on it (504)',
  },
  {
    names: ['NGINX_TLS_CERT', 'NGINX_TLS_KEY'],
    holds: (c) => Boolean(c.NGINX_TLS_CERT) === Boolean(c.NGINX_TLS_KEY),
    why: 'a certificate needs its key and a key its certificate (one alone would quietly serve no TLS)',
  },
  {
    names: ['WARM_NICE', 'TRANSFORM_NICE'],
    holds: (c) => c.WARM_NICE >= c.TRANSFORM_NICE,
    why: "the warmer's transforms must never run ahead of a reader's: WARM_NICE at least TRANSFORM_NICE",
  },
  {
    names: ['WARM', 'HIVE_FOLLOW'],
    holds: (c) => !c.WARM || c.HIVE_FOLLOW,
    why: 'the warmer is fed by the chain follower: WARM without HIVE_FOLLOW would quietly warm nothing',
  },
];

/**
 * Refuses a config that breaks a rule whose settings it holds, naming the settings, their values and why.
 * @param {Record<string, any>} config @param {Rule[]} [rules]
 */
export function checkRules(config, rules = RULES) {
  const broken = rules.filter((rule) => rule.names.every((name) => name in config) && !rule.holds(config));
  if (!broken.length) return;
  throw new Error(
    broken.map((rule) => `${rule.names.map((name) => `${name}=${config[name]}`).join(', ')}: ${rule.why}`).join('; '),
  );
}
