import { AVATAR_SIZES, isAccountName, plainRoute } from '@stack/lib';

/**
 * GET /u/<account>/avatar[/small|medium|large] and /u/<account>/cover, in every spelling: the resolver's hot
 * path, thousands a second on a cache miss wave, answered on the plain `http` request (lib's plainRoute:
 * one writer of the 302, the 301 to the canonical spelling and the JSON error). Any other /u/ path
 * (the default avatar's) is left to Express.
 * @param {{ answer: ReturnType<typeof import('./routes.js').avatarAnswer>, config: import('@stack/lib/src/config-types.js').AvatarResolverConfig,
 *   observe: (route: string, status: number, started: number) => void, logger: import('pino').Logger }} deps
 */
export function avatarRoute({ answer, config, observe, logger }) {
  const shape = {
    prefix: '/u/',
    min: 2,
    max: 3,
    route: (/** @type {string[]} */ [, kind]) => (kind === 'avatar' || kind === 'cover' ? kind : null),
  };
  return plainRoute(
    { observe, logger, errorCacheControl: config.CACHE_CONTROL_NEGATIVE },
    shape,
    async ({ segments, slash }, reply) => {
      const [account, kind, size] = segments;
      const canonical = canonicalPath(account, kind, size);
      if (canonical && canonical !== `/u/${segments.join('/')}${slash ? '/' : ''}`) {
        return reply.send(301, { Location: canonical, 'Cache-Control': config.CACHE_CONTROL_SPELLING });
      }
      reply.send(302, await answer(account, kind, size));
    },
  );
}

/**
 * The one URL of an avatar that every cache knows and every purge names (lib/src/avatars.js avatarPaths):
 * images.hive.blog answers any other size with the medium avatar (src/avatar.ts); here it is a permanent
 * redirect to /u/<account>/avatar, so no cache ever holds the account's avatar under a spelling a purge
 * would miss. The same for a trailing slash. Null for what is refused anyway (a bad name, a cover size).
 * @param {string} account @param {string} kind @param {string | undefined} size
 */
function canonicalPath(account, kind, size) {
  if (!isAccountName(account) || kind === 'cover') return null;
  const known = size !== undefined && Object.hasOwn(AVATAR_SIZES, size);
  return `/u/${account}/avatar${known ? `/${size}` : ''}`;
}
