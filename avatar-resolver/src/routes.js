import express from 'express';
import {
  AVATAR_INVALIDATE_CHANNEL,
  AVATAR_SIZES,
  COVER_SIZE,
  HttpError,
  base58Url,
  enqueuePurge,
  imageUrl,
  isAccountName,
  resolveSource,
  unwrapOptions,
} from '@stack/lib';

import { localKey } from './sources/local.js';

/** A neutral silhouette for accounts without an avatar (used when AVATAR_DEFAULT_URL is empty). */
export const DEFAULT_AVATAR_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64" width="512" height="512">' +
  '<rect width="64" height="64" fill="#d8dde3"/><circle cx="32" cy="25" r="12" fill="#9aa5b1"/>' +
  '<path d="M10 60c2-13 11-20 22-20s20 7 22 20z" fill="#9aa5b1"/></svg>';
export const DEFAULT_AVATAR_PATH = '/u/-/default.svg';

/**
 * The answer to /u/<account>/avatar[/small|medium|large] and /u/<account>/cover: the headers of a 302 to
 * the origin's resize URL, or a thrown HttpError (a 404 carries the account's xkey, so a purge evicts it).
 * A taken-down account, and an image that is taken down, get the default avatar; the 302 carries the xkey
 * of the image it names too (`img:<id>`), so a takedown of that image evicts it, and is remembered under
 * the image for the CDN purge.
 * @param {{ resolver: ReturnType<typeof import('./resolver.js').createResolver>, config: import('@stack/lib/src/config-types.js').AvatarResolverConfig,
 *   metrics: ReturnType<typeof import('./metrics.js').createResolverMetrics>,
 *   takedowns: import('@stack/lib/src/takedowns.js').TakedownList, served: import('@stack/lib/src/takedowns.js').ServedLog['served'] }} deps
 * @returns {(account: string, kind: string, size: string | undefined) => Promise<Record<string, string>>}
 */
export function avatarAnswer({ resolver, config, metrics, takedowns, served }) {
  const unwrap = unwrapOptions(config);
  /**
   * The image to redirect to, null for the default, and its xkey. @param {string} account @param {string | null} image
   * @param {string} path
   */
  const allowed = (account, image, path) => {
    const list = takedowns.current;
    if (!image || list.account(account)) return { image: null, tag: '' };
    let source;
    try {
      source = resolveSource(image, unwrap);
    } catch {
      return { image, tag: '' };
    }
    served(source, [path]);
    return { image: list.source(source) ? null : image, tag: ` img:${source.id}` };
  };
  const base = config.AVATAR_REDIRECT_BASE.replace(/\/$/, '');
  /** @param {string | null} url @param {number} width @param {number} height */
  const target = (url, width, height) => {
    const image = url || config.AVATAR_DEFAULT_URL;
    if (!image) return `${base}${DEFAULT_AVATAR_PATH}`;
    return `${base}/p/${base58Url.encode(image)}?width=${width}&height=${height}`;
  };
  return async (account, kind, size) => {
    if (!isAccountName(account)) throw new HttpError(400, 'invalid_account', { account: account.slice(0, 32) });
    if (kind === 'cover' ? size !== undefined : !Object.hasOwn(AVATAR_SIZES, size || 'medium')) {
      throw new HttpError(400, 'invalid_parameter', { name: 'size', allowed: Object.keys(AVATAR_SIZES) });
    }
    const started = performance.now();
    const { mapping, source } = await resolver.resolve(account);
    const ms = performance.now() - started;
    metrics.lookupDuration.observe({ source }, ms / 1000);
    const found = { xkey: `avatar:${account}`, 'Server-Timing': `lookup;dur=${ms.toFixed(3)};desc="${source}"` };
    if (!mapping) throw new HttpError(404, 'no_such_account', { account }, found);
    const degraded = source === 'stale' || source === 'default';
    const pixels = AVATAR_SIZES[/** @type {keyof typeof AVATAR_SIZES} */ (size || 'medium')];
    const path = `/u/${account}/${kind}${size ? `/${size}` : ''}`;
    const { image, tag } = allowed(account, kind === 'cover' ? mapping.cover : mapping.avatar, path);
    const location =
      kind === 'cover' ? target(image, COVER_SIZE.width, COVER_SIZE.height) : target(image, pixels, pixels);
    return {
      ...found,
      xkey: found.xkey + tag,
      'Cache-Control': degraded ? config.CACHE_CONTROL_DEGRADED_REDIRECT : config.CACHE_CONTROL_REDIRECT,
      Location: location,
    };
  };
}

/** @param {import('express').Request} _req @param {import('express').Response} res */
export const defaultAvatar = (_req, res) => {
  res.locals.route = 'default';
  res.set({
    'Content-Type': 'image/svg+xml',
    'Cache-Control': 'public, max-age=86400',
    'Content-Security-Policy': "default-src 'none'",
  });
  res.send(DEFAULT_AVATAR_SVG);
};

/**
 * PUT /admin/accounts/<account> {avatar, cover}: writes the local mapping, evicts every resolver's copy
 * and queues the purge event. GET returns the stored mapping. Bearer token; never on the public path.
 * @param {{ redis: import('ioredis').Redis, config: import('@stack/lib/src/config-types.js').AvatarResolverConfig, resolver: ReturnType<typeof import('./resolver.js').createResolver>,
 *   metrics: ReturnType<typeof import('./metrics.js').createResolverMetrics> }} deps
 */
export function adminRouter({ redis, config, resolver, metrics }) {
  const router = express.Router({ mergeParams: true });
  const accountOf = (/** @type {import('express').Request} */ req) =>
    /** @type {Record<string, string>} */ (req.params).account;
  router.use((req, res, next) => {
    res.locals.route = 'admin';
    const given = /^Bearer (.+)$/.exec(req.headers.authorization || '')?.[1];
    if (!config.AVATAR_ADMIN_TOKEN) return next(new HttpError(404, 'admin_disabled'));
    if (given !== config.AVATAR_ADMIN_TOKEN)
      return next(new HttpError(401, 'unauthorized', {}, { 'WWW-Authenticate': 'Bearer' }));
    if (config.AVATAR_SOURCE !== 'local')
      return next(new HttpError(409, 'not_local_source', { source: config.AVATAR_SOURCE }));
    if (!isAccountName(accountOf(req))) return next(new HttpError(400, 'invalid_account'));
    return next();
  });
  router.get('/', async (req, res, next) => {
    try {
      res
        .set('Cache-Control', 'no-store')
        .json({ account: accountOf(req), ...(await redis.hgetall(localKey(accountOf(req)))) });
    } catch {
      next(new HttpError(503, 'unavailable', { reason: 'redis' }, { 'Retry-After': '5' }));
    }
  });
  router.put('/', express.json({ limit: '8kb' }), async (req, res, next) => {
    const account = accountOf(req);
    const body = req.body && typeof req.body === 'object' ? req.body : {};
    try {
      const update = validUpdate(body);
      const key = localKey(account);
      const multi = redis.multi();
      for (const [field, value] of Object.entries(update)) {
        if (value) multi.hset(key, field, value);
        else multi.hdel(key, field);
      }
      await multi.exec().catch(unavailable);
      resolver.forget(account);
      await redis.publish(AVATAR_INVALIDATE_CHANNEL, account).catch(unavailable);
      const kind = 'avatar' in update && 'cover' in update ? 'both' : 'avatar' in update ? 'avatar' : 'cover';
      const id = await enqueuePurge(
        redis,
        config.PURGE_STREAM,
        { account, kind, source: 'admin', avatar: update.avatar || undefined, cover: update.cover || undefined },
        { durability: config },
      ).catch(unavailable);
      metrics.adminUpdates.inc();
      res.set('Cache-Control', 'no-store').json({ account, ...update, purge: id });
    } catch (err) {
      next(err);
    }
  });
  return router;
}

/** @returns {never} */
function unavailable() {
  throw new HttpError(503, 'unavailable', { reason: 'redis' }, { 'Retry-After': '5' });
}

/** @param {Record<string, unknown>} body @returns {{ avatar?: string | null, cover?: string | null }} */
function validUpdate(body) {
  /** @type {{ avatar?: string | null, cover?: string | null }} */
  const update = {};
  for (const field of /** @type {const} */ (['avatar', 'cover'])) {
    if (!(field in body)) continue;
    const value = body[field];
    if (value === null || value === '') {
      update[field] = null;
      continue;
    }
    const url = imageUrl(value);
    if (!url) throw new HttpError(400, 'invalid_parameter', { name: field, reason: 'expected an http(s) URL or null' });
    update[field] = url;
  }
  if (!Object.keys(update).length) throw new HttpError(400, 'invalid_body', { reason: 'give avatar and/or cover' });
  return update;
}
