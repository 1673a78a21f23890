"""The run's configuration: the schema (`schema`), the rules that span sections (`checks`) and the
registries of named parts (`registry`)."""
