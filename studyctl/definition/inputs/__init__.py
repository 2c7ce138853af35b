"""The words and inputs a study is written in: the vocabulary, model catalog, filesystems, names, backend options,
YAML positions, the point id rule, the training model; no checkpoint layout."""
