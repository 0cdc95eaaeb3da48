"""HTTP shell over the store: routes parse, call one store function, shape the reply."""
