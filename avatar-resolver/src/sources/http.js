import { request } from 'undici';
import { atPath, imageUrl, jsonWithin } from '@stack/lib';

// one account's JSON from the operator's app
const MAX_ANSWER_BYTES = 2 ** 20;

/**
 * A generic JSON endpoint of the operator's app: GET url with {account} replaced; 404 means no such
 * account; the avatar and cover are read at configured JSON paths.
 * @param {{ url: string, avatarPath: string, coverPath: string, timeoutMs: number }} options
 */
export function httpSource({ url, avatarPath, coverPath, timeoutMs }) {
  /** @param {string} name */
  async function fetchOne(name) {
    const response = await request(url.replace('{account}', encodeURIComponent(name)), {
      headers: { accept: 'application/json' },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.statusCode === 404) {
      await response.body.dump();
      return null;
    }
    if (response.statusCode !== 200) {
      await response.body.dump();
      throw new Error(`user endpoint answered ${response.statusCode}`);
    }
    const body = await jsonWithin(response.body, MAX_ANSWER_BYTES, 'the user endpoint');
    return { avatar: imageUrl(atPath(body, avatarPath)), cover: imageUrl(atPath(body, coverPath)) };
  }
  return {
    name: 'http',
    /** @param {string[]} names */
    async fetchMany(names) {
      const found = await Promise.all(names.map(async (name) => /** @type {const} */ ([name, await fetchOne(name)])));
      return new Map(
        /** @type {Array<[string, import('@stack/lib/src/hive-profile.js').Mapping]>} */ (
          found.filter(([, mapping]) => mapping)
        ),
      );
    },
  };
}
