// Native plugins: being written.
