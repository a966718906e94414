// npm run bench [-- --quick] [scenario …]: every benchmark in turn (or the ones named), one report
// bench/reports/<date>.md (<date>-<scenario>… for the ones named) and its JSON twin; the command in it names
// the BENCH_* and FUZZ_* settings it ran with.
import fs from 'node:fs';
import path from 'node:path';
import { benchAvatar } from './avatar.js';
import { benchBadInput } from './bad-input.js';
import { benchCacheIndex } from './cache-index.js';
import { benchCeiling } from './ceiling.js';
import { benchCodecs } from './codecs.js';
import { benchDay } from './day.js';
import { benchEdge } from './edge.js';
import { benchEffort } from './effort.js';
import { benchFuzz } from './fuzz.js';
import { benchHeic } from './heic.js';
import { benchPage } from './page.js';
import { benchKernel } from './kernel.js';
import { benchMalloc } from './malloc.js';
import { benchOrigin } from './origin.js';
import { benchOverload } from './overload.js';
import { benchPeers } from './peers.js';
import { benchPost } from './post.js';
import { benchPurge } from './purge.js';
import { benchScale } from './scale.js';
import { benchStore } from './store.js';
import { benchWorkers } from './workers.js';
import { REPORTS, machine } from './lib.js';

const quick = process.argv.includes('--quick');
const only = process.argv.filter((arg) => !arg.startsWith('--')).slice(2);
const SCENARIOS = {
  origin: benchOrigin,
  effort: benchEffort,
  codecs: benchCodecs,
  kernel: benchKernel,
  peers: benchPeers,
  edge: benchEdge,
  avatar: benchAvatar,
  day: benchDay,
  purge: benchPurge,
  store: benchStore,
  'cache-index': benchCacheIndex,
  overload: benchOverload,
  'bad-input': benchBadInput,
  fuzz: benchFuzz,
  heic: benchHeic,
  page: benchPage,
  scale: benchScale,
  ceiling: benchCeiling,
  post: benchPost,
  workers: benchWorkers,
  // an hour (BENCH_MALLOC_MINUTES)
  malloc: benchMalloc,
};

const results = {};
const sections = [];
for (const [name, run] of Object.entries(SCENARIOS)) {
  if (only.length && !only.includes(name)) continue;
  process.stderr.write(`bench ${name}…\n`);
  const result = await run();
  results[name] = result;
  sections.push(
    ...result.sections.map((/** @type {any} */ section) => ({ ...section, heading: `${name}: ${section.heading}` })),
  );
}
const { writeReport } = await import('./lib.js');
// what a scenario reads from the environment, so the command in the report runs it again as it ran
const settings = Object.entries(process.env)
  .filter(([name]) => /^(BENCH|FUZZ)_/.test(name))
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([name, value]) => `${name}=${value} `)
  .join('');
const file = writeReport('all', {
  title: 'Benchmarks',
  command: `${settings}npm run bench${quick ? ' -- --quick' : ''}${only.length ? ` ${only.join(' ')}` : ''}`,
  machine: await machine(),
  sections,
  data: results,
});
const dated = path.join(REPORTS, `${[new Date().toISOString().slice(0, 10), ...only].join('-')}.md`);
fs.renameSync(file, dated);
fs.renameSync(file.replace(/\.md$/, '.json'), dated.replace(/\.md$/, '.json'));
process.stdout.write(`${fs.readFileSync(dated, 'utf8')}\n`);
process.exit(0);
