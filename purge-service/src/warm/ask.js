// One edge URL asked as a frontend would ask it, with X-Warm: 1.

/**
 * `target` asked with `accept`, redirects followed (at most 5); a 429 (no idle capacity at the origin) or a
 * 503 (its deadline passed while the variant waited) is waited out up to WARM_DEFER_MAX_S while `going()`.
 * The answer's status (508 for too many redirects) and its bytes.
 * @param {string} target @param {string} accept
 * @param {import('@stack/lib/src/config-types.js').PurgeServiceConfig} config @param {() => boolean} going
 * @returns {Promise<{ status: number, bytes: number }>}
 */
export async function askEdge(target, accept, config, going) {
  const deadline = Date.now() + config.WARM_DEFER_MAX_S * 1000;
  let url = target;
  for (let hops = 0; hops < 5;) {
    const response = await fetch(url, {
      headers: { accept, 'x-warm': '1', 'user-agent': 'image-cdn-stack warmer' },
      redirect: 'manual',
      signal: AbortSignal.timeout(config.WARM_TIMEOUT_MS),
    });
    const body = await response.arrayBuffer();
    const location = response.headers.get('location');
    if (response.status >= 300 && response.status < 400 && location) {
      url = new URL(location, url).toString();
      hops += 1;
      continue;
    }
    const later = response.status === 429 || response.status === 503;
    if (!later || Date.now() >= deadline || !going()) return { status: response.status, bytes: body.byteLength };
    const wait = Math.max(200, Number(response.headers.get('retry-after')) * 1000 || 1000);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  return { status: 508, bytes: 0 };
}
