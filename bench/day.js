// bench/day: a realistic day through the full stack. A Zipf-distributed mix of many photographs (real
// wallpapers, cropped differently so each is its own image) in a few sizes each, popular avatars, and 1.5%
// uploads, replayed at a fixed rate by a separate process. Reports the hit ratio of each layer, the origin's
// transforms per second and p50/p99 per route class as the client saw them.
// With a publish stream (#41): new posts arrive on the local Hive node stand-in (one with three new
// photographs every POST_EVERY_S, plus one post of 200 images and a burst of 50 posts half-way), and readers
// follow them: the post's thumbnail in a feed, then each image, first viewed READ_AFTER_S after its block,
// in the browsers of the day (BROWSERS) and the frontends the warmer is configured for (FRONTENDS:
// condenser's body width, ecency's full size). The day runs twice, the warmer off and on (WARM), and the
// report compares the first views' hit ratio and latency and the other misses' p99. WARM_MAX_CPU_PRESSURE in
// the environment is given to the stack (the warmer's CPU pressure gate), and the report is then
// day-psi<N>; DAY_RATE (requests a second, default 150) sets the readers' rate, to measure the warmer where
// the machine has idle CPU (report day-rate<N>); DAY_BURST=0 leaves out the 200-image post and the burst of
// 50 (nobody reads them: load for the warmer only), for the day as it publishes (report day-noburst).
//   [WARM_MAX_CPU_PRESSURE=N] [DAY_RATE=N] [DAY_BURST=0] [KEPT_PIXELS_BYTES=N] [WARM_KEPT_PIXELS=B] [TRANSFORM_WORKERS=N]
//   node bench/day.js [--quick]
import '../lib/src/node-version.js';
import fs from 'node:fs';
import sharp from 'sharp';
import { Redis } from 'ioredis';
import { base58Url } from '@stack/lib';
import { startHiveNode } from '../test/support/hive-node.js';
import { startImageServer } from '../test/support/image-server.js';
import { WALLPAPERS } from '../test/support/images.js';
import { metricValue } from '../test/support/metrics.js';
import { startStack } from '../test/support/stack.js';
import { runChild } from './load-child.js';
import { machine, percentile, processTreeCpuMs, writeReport } from './lib.js';

const quick = process.argv.includes('--quick');
const pressureGate = process.env.WARM_MAX_CPU_PRESSURE || '0';
// KEPT_PIXELS_BYTES: kept pixels (#48) on at that size (report day-kept<size>) or, at 0, off (day-nokept); unset,
// the default (off)
const keptBytes = process.env.KEPT_PIXELS_BYTES;
// WARM_KEPT_PIXELS: whether a warm worker keeps a source's pixels for the warmer's next variants of it (#48;
// default on), given to the stack (report day-warmkept<value>)
const warmKept = process.env.WARM_KEPT_PIXELS;
// TRANSFORM_WORKERS: the origin's worker processes at once (#47), given to the stack (report day-workers<N>)
const workers = process.env.TRANSFORM_WORKERS;
const dayRate = Number(process.env.DAY_RATE || 150);
const burst = process.env.DAY_BURST !== '0';
// the frontends' URLs (#40): condenser's /768x0/ and /256x512/ (their 301s' targets), ecency's body and
// thumbnail; all format=match, negotiated by Accept
const SIZES = [
  'format=match&mode=fit&width=768',
  'format=match&mode=fit&width=256&height=512',
  'format=match&mode=fit',
  'format=match&mode=fit&width=640',
];
// the browsers of the day, by what they accept (about 2026's shares: AVIF everywhere but old Safari and Edge)
const BROWSERS = [
  { share: 0.85, accept: 'image/avif,image/webp,image/apng,*/*;q=0.8' },
  { share: 0.12, accept: 'image/webp,*/*' },
  { share: 0.03, accept: '*/*' },
];
// how a post's image is first seen in full: condenser's body width (its /768x0/, the 301 followed) or
// ecency's full size, half each (the warmer's default WARM_PATHS)
const FRONTENDS = [
  { share: 0.5, size: 'width=768' },
  { share: 0.5, size: '' },
];

/** A deterministic generator (mulberry32), so every run replays the same day. @param {number} seed */
function random(seed) {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Draws ranks 0..n-1 with P(rank) ∝ 1 / (rank + 1)^s. @param {number} n @param {number} s @param {() => number} next */
function zipf(n, s, next) {
  const cdf = [];
  let total = 0;
  for (let rank = 1; rank <= n; rank += 1) cdf.push((total += 1 / rank ** s));
  return () => {
    const target = next() * total;
    let low = 0;
    let high = n - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (cdf[middle] < target) low = middle + 1;
      else high = middle;
    }
    return low;
  };
}

/** `count` distinct photographs: crops of the wallpapers at different offsets and sizes. @param {number} count @param {number} [first] the first crop's number */
async function photographs(count, first = 0) {
  const sources = fs
    .readdirSync(WALLPAPERS)
    .map((name) => `${WALLPAPERS}/${name}/contents/images/1920x1080.jpg`)
    .filter((file) => fs.existsSync(file));
  const images = [];
  for (let i = first; i < first + count; i += 1) {
    const width = 1200 + ((i * 37) % 600);
    const height = 800 + ((i * 53) % 280);
    const left = (i * 13) % (1920 - width + 1);
    const top = (i * 7) % (1080 - height + 1);
    images.push(
      await sharp(sources[i % sources.length])
        .extract({ left, top, width, height })
        .jpeg({ quality: 88 })
        .toBuffer(),
    );
  }
  return images;
}

/** The Accept of a browser drawn by BROWSERS' shares. @param {number} draw in [0, 1) */
function browser(draw) {
  let left = draw;
  for (const { share, accept } of BROWSERS) {
    if (left < share) return accept;
    left -= share;
  }
  return BROWSERS[0].accept;
}

/** @param {{ images: number, accounts: number, requests: number, next: () => number }} plan */
function dayOfRequests({ images, accounts, requests, next }) {
  const image = zipf(images, 1.0, next);
  const account = zipf(accounts, 1.1, next);
  /** @type {Array<{ kind: string, image?: number, size?: string, account?: number, upload?: number, accept?: string }>} */
  const day = [];
  let uploads = 0;
  for (let i = 0; i < requests; i += 1) {
    const draw = next();
    if (draw < 0.015) day.push({ kind: 'upload', upload: uploads++ });
    else if (draw < 0.3) day.push({ kind: 'avatar', account: account() });
    else
      day.push({
        kind: 'image',
        image: image(),
        size: SIZES[Math.floor(next() * SIZES.length)],
        accept: browser(next()),
      });
  }
  return { day, uploads };
}

const POST_EVERY_S = 6;
const READ_AFTER_S = [10, 30];

/**
 * The day's publish stream: which new photograph each post names and when it is published, and the first
 * view of each at READ_AFTER_S after its block: the thumbnail as condenser's feed asks it, each image as a
 * frontend of FRONTENDS does, from a browser of BROWSERS.
 * @param {{ seconds: number, rate: number, next: () => number }} plan
 */
function publishStream({ seconds, rate, next }) {
  /** @type {Array<{ at: number, posts: Array<{ author: string, images: number[] }> }>} */
  const blocks = [];
  /** @type {Array<{ index: number, image: number, size: string, accept: string }>} */
  const firstViews = [];
  const frontend = () => {
    let left = next();
    for (const { share, size } of FRONTENDS) {
      if (left < share) return size;
      left -= share;
    }
    return FRONTENDS[0].size;
  };
  let image = 0;
  const last = seconds - READ_AFTER_S[1] - 3;
  for (let at = 3; at < last; at += POST_EVERY_S) {
    const images = [image++, image++, image++];
    blocks.push({ at, posts: [{ author: `writer-${blocks.length}`, images }] });
    // a feed shows the post's thumbnail; a reader opens it and sees each image at condenser's body width
    const readAt = at + READ_AFTER_S[0] + next() * (READ_AFTER_S[1] - READ_AFTER_S[0]);
    const accept = browser(next());
    const size = frontend();
    firstViews.push({ index: Math.floor((readAt - 3) * rate), image: images[0], size: 'width=256&height=512', accept });
    for (const one of images)
      firstViews.push({ index: Math.floor((readAt + next() * 3) * rate), image: one, size, accept });
  }
  if (!burst) return { blocks, firstViews, images: image };
  // half-way the warmer gets busy: a post of 200 images and a burst of 50 posts (not read: load only)
  const middle = Math.floor(seconds / 2);
  blocks.push({
    at: middle,
    posts: [
      { author: 'gallery', images: Array.from({ length: 200 }, () => image++) },
      ...Array.from({ length: 50 }, (_, i) => ({ author: `burst-${i}`, images: [image++] })),
    ],
  });
  return { blocks: blocks.sort((a, b) => a.at - b.at), firstViews, images: image };
}

/** @returns {Promise<any>} */
export async function benchDay() {
  const off = await measureDay({ warm: false });
  const on = await measureDay({ warm: true });
  return { off, on, sections: [...daySections(off), ...warmSections(off, on)] };
}

/** @param {{ warm: boolean }} options */
async function measureDay({ warm }) {
  const seconds = quick ? 60 : 180;
  const rate = dayRate;
  const next = random(20261122);
  const server = await startImageServer();
  const hive = await startHiveNode();
  let head = 1000;
  /** @type {Map<number, any[]>} */
  const chain = new Map();
  hive.methods['condenser_api.get_dynamic_global_properties'] = () => ({ head_block_number: head });
  hive.methods['condenser_api.get_ops_in_block'] = ([block]) => chain.get(block) || [];
  const stack = await startStack({
    UPLOAD_TOKENS: 'day',
    FETCH_ALLOW_PRIVATE_HOSTS: 'localhost',
    NGINX_RATE_LIMIT: '100000',
    NGINX_RATE_BURST: '100000',
    VARNISH_MISS_LIMIT: '0',
    LOG_LEVEL: 'warn',
    HIVE_API_URLS: hive.url,
    HIVE_FOLLOW: 'true',
    HIVE_FOLLOW_START_BLOCK: '1001',
    WARM: String(warm),
    WARM_MAX_CPU_PRESSURE: pressureGate,
    ...(keptBytes ? { KEPT_PIXELS_BYTES: keptBytes } : {}),
    ...(workers ? { TRANSFORM_WORKERS: workers } : {}),
    ...(warmKept ? { WARM_KEPT_PIXELS: warmKept } : {}),
  });
  /** @type {NodeJS.Timeout[]} */
  const timers = [];
  try {
    const imageCount = quick ? 150 : 600;
    const accountCount = 2000;
    const bodies = await photographs(imageCount);
    const urls = bodies.map((body, i) => server.add(`photo-${i}.jpg`, body).replace('127.0.0.1', 'localhost'));
    const redis = new Redis(stack.redisUrl);
    const pipeline = redis.pipeline();
    for (let i = 0; i < accountCount; i += 1) pipeline.hset(`avatar:local:user-${i}`, 'avatar', urls[i % urls.length]);
    await pipeline.exec();
    redis.disconnect();
    const { day, uploads } = dayOfRequests({
      images: imageCount,
      accounts: accountCount,
      requests: seconds * rate,
      next,
    });
    // the new posts' photographs: crops no other request names
    const stream = publishStream({ seconds, rate, next });
    const fresh = await photographs(stream.images, imageCount);
    const freshUrls = fresh.map((body, i) => server.add(`new-${i}.jpg`, body).replace('127.0.0.1', 'localhost'));
    const uploadBodies = await Promise.all(
      Array.from({ length: uploads }, (_, i) =>
        sharp({
          create: { width: 640, height: 480, channels: 3, background: { r: i % 256, g: (i >> 8) % 256, b: 99 } },
        })
          .jpeg()
          .toBuffer(),
      ),
    );
    const requests = day.map((entry) => {
      if (entry.kind === 'upload') return { kind: 'upload', path: '/upload', upload: entry.upload };
      if (entry.kind === 'avatar') return { kind: 'avatar', path: `/u/user-${entry.account}/avatar` };
      return {
        kind: 'image',
        path: `/p/${base58Url.encode(urls[/** @type {number} */ (entry.image)])}?${entry.size}`,
        accept: entry.accept,
      };
    });
    for (const view of stream.firstViews) {
      requests[view.index] = {
        kind: 'new post, first view',
        path: `/p/${base58Url.encode(freshUrls[view.image])}?format=match&mode=fit${view.size ? `&${view.size}` : ''}`,
        accept: view.accept,
      };
    }
    const publishedAt = performance.now();
    for (const block of stream.blocks) {
      timers.push(
        setTimeout(
          () => {
            chain.set(
              head + 1,
              block.posts.map((post, i) => ({
                op: [
                  'comment',
                  {
                    parent_author: '',
                    parent_permlink: 'photography',
                    author: post.author,
                    permlink: `post-${block.at}-${i}`,
                    title: 'new',
                    json_metadata: JSON.stringify({ image: post.images.slice(0, 1).map((n) => freshUrls[n]) }),
                    body: post.images.map((n) => `![photo](${freshUrls[n]})`).join('\n\n'),
                  },
                ],
              })),
            );
            head += 1;
          },
          block.at * 1000 - (performance.now() - publishedAt),
        ),
      );
    }
    const origin = `http://127.0.0.1:${stack.env.ORIGIN_METRICS_PORT}/metrics`;
    const resolver = `http://127.0.0.1:${stack.env.AVATAR_RESOLVER_METRICS_PORT}/metrics`;
    const transformsBefore = await metricValue(origin, 'origin_transforms_total');
    const originPid = await stack.pid('origin');
    const cpuBefore = processTreeCpuMs(originPid);
    const started = performance.now();
    const byKind = await runChild({
      mode: 'mix',
      base: stack.base,
      requests,
      uploads: uploadBodies.map((body) => body.toString('base64')),
      token: 'day',
      rate,
      accept: 'image/avif,image/webp,*/*',
    });
    const elapsed = (performance.now() - started) / 1000;
    const varnish = await stack.varnishStats();
    const layers = {
      varnish: { hits: varnish('MAIN.cache_hit'), misses: varnish('MAIN.cache_miss'), passes: varnish('MAIN.s_pass') },
      originVariants: {
        hits: await metricValue(origin, 'origin_cache_requests_total', { level: 'variant', result: 'hit' }),
        misses: await metricValue(origin, 'origin_cache_requests_total', { level: 'variant', result: 'miss' }),
      },
      originOriginals: {
        hits: await metricValue(origin, 'origin_cache_requests_total', { level: 'original', result: 'hit' }),
        misses: await metricValue(origin, 'origin_cache_requests_total', { level: 'original', result: 'miss' }),
      },
      resolver: Object.fromEntries(
        await Promise.all(
          ['memory', 'redis', 'upstream', 'stale', 'default'].map(async (source) => [
            source,
            await metricValue(resolver, 'resolver_lookups_total', { source }),
          ]),
        ),
      ),
    };
    const transforms = (await metricValue(origin, 'origin_transforms_total')) - transformsBefore;
    const originCpu = processTreeCpuMs(originPid) - cpuBefore;
    const kept = Object.fromEntries(
      await Promise.all(
        ['hit', 'made', 'joined', 'alone', 'short'].map(async (result) => [
          result,
          await metricValue(origin, 'origin_kept_pixels_total', { result }),
        ]),
      ),
    );
    const fetches = server.hitsTotal();
    const classes = Object.fromEntries(
      Object.entries(byKind).map(([kind, entry]) => [
        kind,
        {
          requests: entry.ms.length,
          statuses: entry.statuses,
          hits: entry.hits,
          p50: percentile(entry.ms, 0.5),
          p99: percentile(entry.ms, 0.99),
        },
      ]),
    );
    const purge = `http://127.0.0.1:${stack.env.PURGE_SERVICE_METRICS_PORT}/metrics`;
    const warmer = Object.fromEntries(
      await Promise.all(
        ['warmed', 'skipped', 'failed'].map(async (result) => [
          result,
          await metricValue(purge, 'purge_warm_images_total', { result }),
        ]),
      ),
    );
    return {
      warm,
      seconds: elapsed,
      rate,
      requests: requests.length,
      images: imageCount,
      accounts: accountCount,
      uploads,
      layers,
      transforms,
      originCpu,
      kept,
      fetches,
      classes,
      warmer,
      posts: stream.blocks.length,
    };
  } finally {
    timers.forEach((timer) => clearTimeout(timer));
    await stack.stop();
    await Promise.all([server.close(), hive.close()]);
  }
}

/** The publish stream's comparison: the warmer off, then on. @param {any} off @param {any} on */
function warmSections(off, on) {
  const row = (/** @type {any} */ run, /** @type {string} */ name) => {
    const first = run.classes['new post, first view'] || { requests: 0, hits: 0, p50: 0, p99: 0 };
    const misses = run.classes['image miss, all'] || { p99: 0 };
    return [
      name,
      first.requests,
      `${((100 * first.hits) / Math.max(1, first.requests)).toFixed(1)} %`,
      first.p50,
      first.p99,
      misses.p99,
      run.classes.image?.p99 ?? 0,
      `${run.warmer.warmed} / ${run.warmer.skipped} / ${run.warmer.failed}`,
      run.transforms,
      (run.originCpu / 1000).toFixed(1),
      `${run.kept.hit} / ${run.kept.made} / ${run.kept.alone}`,
    ];
  };
  const offMiss = off.classes['image miss, all']?.p99 || 0;
  const onMiss = on.classes['image miss, all']?.p99 || 0;
  // what the warmer added to the origin's CPU, and a warmed image's share of it
  const warmerCpu = on.originCpu - off.originCpu;
  const perImage = on.warmer.warmed ? `, ${Math.round(warmerCpu / on.warmer.warmed)} ms a warmed image` : '';
  return [
    {
      heading: `New posts read as they are published (a post of three new photographs every ${POST_EVERY_S} s, its feed thumbnail at condenser's /256x512/ and each image first viewed ${READ_AFTER_S[0]}–${READ_AFTER_S[1]} s after its block at ${FRONTENDS.map((f) => `${Math.round(f.share * 100)} % ${f.size || 'full size'}`).join(', ')}, by the day's browsers${burst ? '; half-way one post of 200 images and a burst of 50 posts, not read' : ''}), the warmer off and on (target: at least 95 % of first views cache hits; other misses' p99 within 10 % of the run without the warmer)`,
      text: `Other image misses' p99 with the warmer on: ${Math.round(onMiss)} ms against ${Math.round(offMiss)} ms without (${offMiss ? `${(((onMiss - offMiss) / offMiss) * 100).toFixed(1)} %` : 'n/a'}). The warmer's CPU (the origin's with it less without it): ${(warmerCpu / 1000).toFixed(1)} s${perImage}. Kept pixels: origin_kept_pixels_total's hits, decodes kept and variants decoded alone, the warm workers' own included (WARM_KEPT_PIXELS).`,
      table: {
        columns: [
          'warmer',
          'first views',
          'cache hits',
          'first view p50 ms',
          'first view p99 ms',
          'other misses p99 ms',
          'all images p99 ms',
          'images warmed / skipped / failed',
          'origin transforms',
          "origin's CPU s",
          'kept pixels hits / made / alone',
        ],
        rows: [row(off, 'off'), row(on, 'on')],
      },
    },
  ];
}

/** @param {{ hits: number, misses: number }} layer */
const ratio = (layer) =>
  `${((100 * layer.hits) / Math.max(1, layer.hits + layer.misses)).toFixed(1)}% (${layer.hits} / ${layer.hits + layer.misses})`;

/** @param {Awaited<ReturnType<typeof measureDay>>} result */
export function daySections(result) {
  const { layers } = result;
  const resolverTotal = Object.values(layers.resolver).reduce((sum, value) => sum + value, 0);
  return [
    {
      heading: `A realistic day: ${result.requests} requests in ${result.seconds.toFixed(0)} s (${result.rate}/s), ${result.images} photographs × ${SIZES.length} sizes (Zipf s=1.0), ${result.accounts} accounts (Zipf s=1.1), 1.5% uploads, the frontends' format=match URLs from browsers ${BROWSERS.map((b) => `${Math.round(b.share * 100)} % \`${b.accept.split(',')[0]}\``).join(', ')}`,
      table: {
        columns: ['layer', 'hit ratio (hits / lookups)'],
        rows: [
          ['varnish', ratio(layers.varnish)],
          ['origin variant cache (disk)', ratio(layers.originVariants)],
          ['origin original cache (disk)', ratio(layers.originOriginals)],
          // what varnish passes on: each account's first request and each expiry (the local source is a Redis hash)
          [
            'avatar resolver caches (in-process, then Redis)',
            `${((100 * (layers.resolver.memory + layers.resolver.redis)) / Math.max(1, resolverTotal)).toFixed(1)}% (in-process ${layers.resolver.memory}, Redis ${layers.resolver.redis}, source ${layers.resolver.upstream}, default ${layers.resolver.default})`,
          ],
        ],
      },
    },
    {
      heading: 'Per route class at the edge (as the client saw it; target for images: 503s < 0.1 %, p99 < 1 s)',
      text: `Origin transforms: ${result.transforms} (${(result.transforms / result.seconds).toFixed(1)}/s), the origin's CPU (its process and its workers) ${(result.originCpu / 1000).toFixed(1)} s, ${(result.originCpu / Math.max(1, result.transforms)).toFixed(1)} ms a transform; kept pixels (KEPT_PIXELS_BYTES${keptBytes ? `=${keptBytes}` : ' default'}): ${result.kept.hit} hits, ${result.kept.made} decodes kept, ${result.kept.joined} joined, ${result.kept.alone} small ones decoded alone, ${result.kept.short} larger than kept (${((100 * result.kept.hit) / Math.max(1, result.transforms)).toFixed(1)} % of the transforms made from kept pixels); remote fetches of originals: ${result.fetches}. "image miss, <format>": the image requests varnish did not have (X-Cache not HIT), by the format they were answered in: the cold-miss latency of each output format (a first answer to an AVIF browser is WebP while its AVIF is made in the background).`,
      table: {
        columns: ['class', 'requests', 'statuses', 'p50 ms', 'p99 ms'],
        rows: Object.entries(result.classes).map(([kind, entry]) => [
          kind,
          entry.requests,
          JSON.stringify(entry.statuses),
          entry.p50,
          entry.p99,
        ]),
      },
    },
  ];
}

if (import.meta.main) {
  const result = await benchDay();
  const gated = pressureGate !== '0';
  const slower = dayRate !== 150;
  const keptName = keptBytes === '0' ? '-nokept' : keptBytes ? `-kept${keptBytes}` : '';
  const name = `day${gated ? `-psi${pressureGate}` : ''}${slower ? `-rate${dayRate}` : ''}${burst ? '' : '-noburst'}${keptName}${warmKept ? `-warmkept${warmKept}` : ''}${workers ? `-workers${workers}` : ''}`;
  const environment = `${gated ? `WARM_MAX_CPU_PRESSURE=${pressureGate} ` : ''}${slower ? `DAY_RATE=${dayRate} ` : ''}${burst ? '' : 'DAY_BURST=0 '}${keptBytes ? `KEPT_PIXELS_BYTES=${keptBytes} ` : ''}${warmKept ? `WARM_KEPT_PIXELS=${warmKept} ` : ''}${workers ? `TRANSFORM_WORKERS=${workers} ` : ''}`;
  const file = writeReport(name, {
    title: 'bench/day',
    command: `${environment}node bench/day.js${quick ? ' --quick' : ''}`,
    machine: await machine(),
    sections: result.sections,
    data: result,
  });
  process.stdout.write(`${fs.readFileSync(file, 'utf8')}\n`);
}
