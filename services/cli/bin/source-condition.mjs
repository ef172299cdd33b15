// Resolve hook (module.register): resolves workspace packages through their `@agentry/source`
// export condition, i.e. to their TypeScript sources.
export async function resolve(specifier, context, nextResolve) {
  const conditions = context.conditions.includes('@agentry/source') ? context.conditions : ['@agentry/source', ...context.conditions];
  return nextResolve(specifier, { ...context, conditions });
}
