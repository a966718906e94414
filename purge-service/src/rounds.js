/**
 * `work` done in rounds until stopped, `everyMs` after each round ends (never two at once); a round that
 * throws is logged (`what`) and the next comes as usual. stop() resolves once the round in progress ended.
 * @param {{ work: () => Promise<void>, everyMs: number, logger: import('pino').Logger, what: string }} options
 */
export function inRounds({ work, everyMs, logger, what }) {
  let running = false;
  /** @type {Promise<void> | null} */
  let done = null;
  async function loop() {
    while (running) {
      try {
        await work();
      } catch (err) {
        logger.warn({ err: /** @type {Error} */ (err).message }, what);
      }
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  }
  return {
    /** Whether it is still to go on (work may stop early in a long round). */
    running: () => running,
    start() {
      running = true;
      done = loop();
    },
    async stop() {
      running = false;
      await done;
    },
  };
}
