// What the store commands (migrate-store, scrub-store) share: every item through `work`, `concurrency` at a
// time, each outcome counted, a progress bar on a terminal (else a line every tenth of the way).

/**
 * @template T @param {{ items: T[], concurrency: number, outcomes: string[], work: (item: T) => Promise<string>,
 *   name: (item: T) => string, log?: (line: string) => void }} options
 * @returns {Promise<Record<string, number> & { total: number }>}
 */
export async function runBatch({
  items,
  concurrency,
  outcomes,
  work,
  name,
  log = (line) => process.stderr.write(`${line}\n`),
}) {
  /** @type {Record<string, number>} */
  const counts = Object.fromEntries([...outcomes, 'failed'].map((outcome) => [outcome, 0]));
  const show = progress(items.length);
  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++];
      let outcome;
      try {
        outcome = await work(item);
      } catch (err) {
        outcome = 'failed';
        log(`\n${name(item)}: ${/** @type {Error} */ (err).message}`);
      }
      counts[outcome] = (counts[outcome] || 0) + 1;
      show(++done, counts);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  if (process.stderr.isTTY) process.stderr.write('\n');
  return { total: items.length, ...counts };
}

/** @param {number} total */
function progress(total) {
  const tty = process.stderr.isTTY;
  let lastTenth = -1;
  return (/** @type {number} */ done, /** @type {Record<string, number>} */ counts) => {
    const share = total ? done / total : 1;
    const bar = '#'.repeat(Math.round(share * 30)).padEnd(30, '.');
    const line = `[${bar}] ${done}/${total} ${Object.entries(counts)
      .map(([outcome, count]) => `${outcome} ${count}`)
      .join(', ')}`;
    if (tty) process.stderr.write(`\r${line}`);
    else if (Math.floor(share * 10) > lastTenth || done === total) {
      lastTenth = Math.floor(share * 10);
      process.stderr.write(`${line}\n`);
    }
  };
}
