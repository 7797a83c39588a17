"""What the user writes: the experiment file, its schema, ${NAME} expansion, the search space, the model's config.json."""
