"""The Optuna study: storage, fingerprints, hosts and their runners."""
