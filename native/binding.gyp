{
  "targets": [
    {
      "target_name": "baton_native",
      "sources": ["baton_native.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-O3", "-Wall", "-Wextra"],
      "libraries": ["-lopenblas"]
    }
  ]
}
