import Type from 'typebox';

/** A string enum as `{type: 'string', enum}`: the form every model provider's tool schemas accept. */
export function StringEnum<const T extends string>(values: readonly T[], opts: { description?: string } = {}) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...opts });
}
