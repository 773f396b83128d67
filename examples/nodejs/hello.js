// The smallest useful action: greets `name` (default "World").
function main(params) {
  const name = params.name || 'World';
  return { greeting: `Hello, ${name}!` };
}
