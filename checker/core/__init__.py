"""The native search core (native/, `kafkamc._core`): loading it, and the search it runs."""
