// What a post shows and how the warmer is handed it: the image URLs of a `comment` op, queued on the warm
// stream by the chain follower (../hive-follow.js), and the edge URL a frontend asks for each.
import { base58Url } from '@stack/lib';

/** @typedef {{ author: string, permlink: string, urls: string[] }} WarmPost */

const MARKDOWN_IMAGE = /!\[[^\]]*\]\(\s*<?(https?:\/\/[^\s)>]+)>?(?:\s+["'][^"']*["'])?\s*\)/gi;
const HTML_IMAGE = /<img\b[^>]*?\bsrc\s*=\s*["'](https?:\/\/[^"']+)["']/gi;
const BARE_IMAGE =
  /(?:^|[\s(>])(https?:\/\/[^\s<>"')]+?\.(?:jpe?g|png|gif|webp|avif|heic)(?:\?[^\s<>"')]*)?)(?=$|[\s)<"'])/gim;

/**
 * The image URLs a post shows, in the order a frontend would ask for them: json_metadata.image first (the
 * feed thumbnail is its first), then the images of the body (markdown, <img>, bare image links), each once.
 * @param {{ body?: string, json_metadata?: string }} op @returns {string[]}
 */
export function imagesOf(op) {
  /** @type {string[]} */
  const urls = [];
  try {
    const images = JSON.parse(op.json_metadata || '{}')?.image;
    if (Array.isArray(images)) urls.push(...images.filter((url) => typeof url === 'string'));
  } catch {
    // a post's metadata that is not JSON names no image
  }
  const body = String(op.body || '');
  const found = [MARKDOWN_IMAGE, HTML_IMAGE, BARE_IMAGE].flatMap((pattern) =>
    [...body.matchAll(pattern)].map((match) => ({ at: match.index, url: match[1] })),
  );
  urls.push(...found.sort((a, b) => a.at - b.at).map((match) => match.url));
  return [
    ...new Set(urls.map((url) => url.trim()).filter((url) => /^https?:\/\/[^/\s]+/i.test(url) && url.length <= 2000)),
  ];
}

/**
 * Queues a `comment` op's images for the warmer (called by the follower before it moves its cursor, so a
 * restart repeats a block rather than skipping it: each URL is warmed once a day anyway).
 * @param {import('ioredis').Redis} redis @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config @param {any} op
 */
export async function warmPost(redis, config, op) {
  const urls = imagesOf(op);
  if (!urls.length || typeof op.author !== 'string') return false;
  await redis.xadd(
    config.WARM_STREAM,
    'MAXLEN',
    '~',
    String(config.WARM_STREAM_MAX),
    '*',
    'author',
    op.author,
    'permlink',
    String(op.permlink || ''),
    'urls',
    JSON.stringify(urls),
  );
  return true;
}

/**
 * The edge URL a frontend asks for `url` with the path template `template` ({url}: as it is, {base58}: encoded).
 * @param {string} edge @param {string} template @param {string} url
 */
export function warmUrl(edge, template, url) {
  return `${edge}${template.replace('{url}', url).replace('{base58}', base58Url.encode(url))}`;
}
