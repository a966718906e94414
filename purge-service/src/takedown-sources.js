import fs from 'node:fs';
import path from 'node:path';
import { textWithin } from '@stack/lib';
import { request } from 'undici';
import { entriesOfDocument } from './takedowns.js';

/**
 * Watched takedown files and polled list URLs: each is one source of the list, replaced as a whole when its
 * content changes (an entry removed from the file is unblocked). A file that is missing or not valid JSON,
 * and a list URL that fails, keep their last entries (a typo never unblocks anything).
 * @param {{ store: import('./takedowns.js').TakedownStore, config: import('@stack/lib/src/config-types.js').PurgeServiceConfig, logger: import('pino').Logger }} deps
 */
export function createListSync({ store, config, logger }) {
  /** @type {Map<string, string>} source → the content last applied */
  const applied = new Map();
  /** @type {(() => void)[]} */
  const stops = [];

  /** @param {string} source @param {string} text */
  async function applyText(source, text) {
    if (applied.get(source) === text) return;
    const { entries, refused } = entriesOfDocument(JSON.parse(text), store.unwrap);
    const { changes } = await store.apply({
      mode: 'replace',
      source,
      entries,
      by: source,
      reason: 'list',
      reference: '',
    });
    applied.set(source, text);
    logger.info({ source, entries: entries.length, refused, changes: changes.length }, 'takedown list applied');
  }

  /** @param {string} file */
  async function syncFile(file) {
    const source = `file:${path.resolve(file)}`;
    try {
      const { size } = await fs.promises.stat(file);
      if (size > config.TAKEDOWN_LIST_MAX_BYTES) throw new Error(`larger than ${config.TAKEDOWN_LIST_MAX_BYTES} bytes`);
      await applyText(source, await fs.promises.readFile(file, 'utf8'));
    } catch (err) {
      logger.warn(
        { source, err: /** @type {Error} */ (err).message },
        'takedown file not applied: its last entries stay',
      );
    }
  }

  // a list's whole fetch, not each chunk: one that trickled in held its sync for good (the next never started,
  // so new entries of that list were never applied); within its poll interval, 5 s to a minute
  const deadlineMs = Math.max(5_000, Math.min(60_000, config.TAKEDOWN_LIST_POLL_S * 1000));

  /** @param {string} url */
  async function syncUrl(url) {
    const source = `list:${url}`;
    try {
      const response = await request(url, {
        headersTimeout: 10000,
        bodyTimeout: 10000,
        signal: AbortSignal.timeout(deadlineMs),
      });
      if (response.statusCode !== 200) {
        await response.body.dump();
        throw new Error(`answered ${response.statusCode}`);
      }
      await applyText(source, await textWithin(response.body, config.TAKEDOWN_LIST_MAX_BYTES, 'the list'));
    } catch (err) {
      logger.warn(
        { source, err: /** @type {Error} */ (err).message },
        'takedown list not applied: its last entries stay',
      );
    }
  }

  /** @param {() => Promise<void>} sync @param {number} ms */
  function every(sync, ms) {
    let running = false;
    const tick = async () => {
      if (running) return;
      running = true;
      await sync();
      running = false;
    };
    tick();
    const timer = setInterval(tick, ms);
    stops.push(() => clearInterval(timer));
    return tick;
  }

  return {
    start() {
      for (const file of config.TAKEDOWN_FILES) {
        const tick = every(() => syncFile(file), config.TAKEDOWN_FILE_POLL_MS);
        try {
          // the directory, not the file: editors replace a file by renaming a new one over it
          const watcher = fs.watch(path.dirname(path.resolve(file)), (_event, name) => {
            if (!name || name === path.basename(file)) tick();
          });
          watcher.on('error', () => {});
          stops.push(() => watcher.close());
        } catch (err) {
          logger.warn({ file, err: /** @type {Error} */ (err).message }, 'takedown file not watched: polled only');
        }
      }
      for (const url of config.TAKEDOWN_LIST_URLS) every(() => syncUrl(url), config.TAKEDOWN_LIST_POLL_S * 1000);
    },
    stop() {
      for (const stop of stops) stop();
    },
  };
}
