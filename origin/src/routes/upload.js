// The upload routes (images.hive.blog's): each authorises its own way and hands the body to the upload
// pipeline (../uploads/accept.js); nginx's upload check runs the same prechecks before the body is read.
import { HttpError, paramsOf } from '@stack/lib';
import { challengeHash, keyFromDigest } from '../keys.js';
import { acceptUpload } from '../uploads/accept.js';
import { clientOf, countFailure, hivePrecheck, hivesignerPrecheck, tokenPrecheck } from '../uploads/checks.js';
import { takeQuota } from '../uploads/quota.js';

/** @typedef {import('../uploads/accept.js').UploadDeps} UploadDeps */

/**
 * POST /<account>/<signature>: the Hive upload, signed over sha256("ImageSigningChallenge" + bytes).
 * POST /cs/<account>/<signature> (`signed: 'checksum'`, imagehoster's uploadCsHandler): signed over
 * sha256("ImageSigningChallenge" + sha256(bytes)), so a wallet signs 32 bytes instead of the whole image.
 * Either way the key is the first digest's, so the same bytes have one URL. The precheck runs here unless it
 * passed in nginx's upload check of this very request (`prechecked`).
 * @param {UploadDeps & { redis: import('ioredis').Redis, verifySignature: import('../uploads/hive-auth.js').VerifySignature,
 *   prechecked: import('../uploads/checks.js').PassedPrechecks }} deps
 * @param {'data' | 'checksum'} [signed]
 * @returns {import('express').RequestHandler}
 */
export function hiveUploadRoute(deps, signed = 'data') {
  return async (req, res, next) => {
    res.locals.route = 'upload';
    const { account, signature } = paramsOf(req);
    try {
      if (!deps.prechecked.take(res.locals.requestId, req.path))
        await hivePrecheck(deps, account, signature, clientOf(req)).catch((err) => {
          deps.metrics.rejections.inc({ reason: err.name });
          throw err;
        });
      await acceptUpload(
        deps,
        'hive',
        async (digest, checksum) => {
          await deps
            .verifySignature(account, signature, checksum ? challengeHash().update(checksum).digest() : digest)
            .catch((err) => countFailure(deps, err, clientOf(req)));
          await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, keyFromDigest(digest));
          return account;
        },
        req,
        res,
        signed === 'checksum',
      );
    } catch (err) {
      next(err);
    }
  };
}

/**
 * POST /hs/<access token>: the upload of a user logged in through Hivesigner (imagehoster's uploadHsHandler).
 * Off (404) until HIVESIGNER_APP names this site's Hivesigner app.
 * @param {UploadDeps & { redis: import('ioredis').Redis, verifyHivesigner: ((token: string) => Promise<string>) | null }} deps
 * @returns {import('express').RequestHandler}
 */
export function hivesignerUploadRoute(deps) {
  return async (req, res, next) => {
    res.locals.route = 'upload';
    try {
      const { token } = paramsOf(req);
      const verify = hivesignerPrecheck(deps, token);
      await acceptUpload(
        deps,
        'hivesigner',
        async (digest) => {
          const account = await verify(token);
          await takeQuota(deps.redis, account, deps.config.UPLOAD_QUOTA_PER_WEEK, keyFromDigest(digest));
          return account;
        },
        req,
        res,
      );
    } catch (err) {
      next(err);
    }
  };
}

/**
 * POST /upload with `Authorization: Bearer <token>`, for sites without Hive accounts.
 * @param {UploadDeps} deps
 * @returns {import('express').RequestHandler}
 */
export function tokenUploadRoute(deps) {
  const check = tokenPrecheck(deps);
  return async (req, res, next) => {
    res.locals.route = 'upload';
    try {
      check(req);
      await acceptUpload(deps, 'token', async () => null, req, res);
    } catch (err) {
      next(err);
    }
  };
}

/**
 * GET /.upload-check/<upload path>: nginx asks this before it reads an upload's body (nginx/upload-body.lua),
 * so an upload that would be refused whatever its bytes (a wrong token, a malformed signature, a full week,
 * a client sending forged signatures) is refused before it can hold an upload slot. 204: read the body.
 * Not on the public path (nginx's location is internal). A Hive upload's pass is remembered for its route.
 * @param {UploadDeps & { verifyHivesigner: ((token: string) => Promise<string>) | null,
 *   prechecked: import('../uploads/checks.js').PassedPrechecks }} deps
 * @returns {import('express').RequestHandler}
 */
export function uploadCheckRoute(deps) {
  const token = tokenPrecheck(deps);
  return async (req, res, next) => {
    res.locals.route = 'upload-check';
    try {
      const path = req.path.slice('/.upload-check'.length);
      const hive = /^\/(?:cs\/)?([^/]+)\/([^/]+)$/.exec(path);
      if (path === '/upload') token(req);
      else if (path.startsWith('/hs/')) hivesignerPrecheck(deps, path.slice(4));
      else if (path.startsWith('/proxy-auth/')) {
        /* a small signed JSON body, checked by its own route */
      } else if (hive) {
        await hivePrecheck(deps, decodeURIComponent(hive[1]), decodeURIComponent(hive[2]), clientOf(req));
        deps.prechecked.pass(res.locals.requestId, path);
      } else throw new HttpError(404, 'not_found');
      res.set('Cache-Control', 'no-store').status(204).end();
    } catch (err) {
      deps.metrics.rejections.inc({ reason: /** @type {HttpError} */ (err).name || 'error' });
      next(err);
    }
  };
}
