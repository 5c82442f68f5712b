/** A valid workload profile of two blocks, fresh each call (tests change it to make it invalid). */
export const validProfile = () => ({
  description: 'two blocks',
  depth: 'fixed',
  backwardRatio: 2,
  weightGradFraction: 0.5,
  communication: { latencyMs: 0.1, bandwidthGBps: 10, activationBytes: 1024 },
  layers: [
    { name: 'embed', placement: 'first', forwardMs: 0.5 },
    { name: 'block', count: 2, forwardMs: 3 },
  ],
});

/**
 * A profile of one layer kind with free communication: `count` layers of `forwardMs` each, a
 * backward `backwardRatio` times a forward, split `weightGradFraction` into W.
 */
export const oneLayerProfile = (
  description: string,
  layer: { name: string; count: number; forwardMs: number },
  backwardRatio: number,
  weightGradFraction: number,
) => ({
  description,
  depth: 'fixed',
  backwardRatio,
  weightGradFraction,
  communication: { latencyMs: 0, bandwidthGBps: 1, activationBytes: 0 },
  layers: [layer],
});
