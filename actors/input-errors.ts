// Which errors mean bad flags or input (exit 2) rather than a failed job (exit 1), by
// name: a node agent's refusal carries only its error's name back to the launcher.

export const INPUT_ERROR_NAMES: ReadonlySet<string> = new Set([
  'UsageError',
  'ShapeError',
  'UnknownPolicyError',
  'ProfileError',
  'BackpressureLimitError',
  'PolicyModuleError',
  'SubjectError',
  'CheckpointError',
  'CorpusError',
  'ModelConfigError',
  'PartitionError',
  'BackendError',
  'JobConfigError',
  'JitterError',
  'JobNameTakenError',
  'FilesNotAllowedError',
  'NodeInputError',
]);
