// Preloaded into the service by bench/allocations.sh (node --require): the first SIGUSR2 starts V8's
// sampling heap profiler, counting objects already collected too (what a request allocates, not
// what it keeps); the second stops it and writes the profile to $ALLOCATION_PROFILE.
const inspector = require('node:inspector');
const { writeFileSync } = require('node:fs');

const session = new inspector.Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  if (!sampling) {
    sampling = true;
    session.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMinorGC: true, includeObjectsCollectedByMajorGC: true });
    return;
  }
  sampling = false;
  session.post('HeapProfiler.stopSampling', (error, result) => {
    if (error) process.stderr.write(`allocation sampler: ${error.message}\n`);
    else writeFileSync(process.env.ALLOCATION_PROFILE, JSON.stringify(result.profile));
  });
});
