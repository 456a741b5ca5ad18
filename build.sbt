// mapwithstate: the Spark Connect plugin (jvm/) and its protobuf contract (proto/).

// The one place the JVM build pins Spark. Spark 4.3.0 is not on Maven Central; its jars come
// from the pyspark 4.3.0 distribution that pyproject.toml pins, found by dev/sbt (SPARK_JARS_DIR).
val sparkVersion = "4.3.0"

ThisBuild / organization := "io.mapwithstate"
ThisBuild / version := "0.1.0"
ThisBuild / scalaVersion := "2.13.18"
ThisBuild / javacOptions ++= Seq("--release", "17")
ThisBuild / scalacOptions ++= Seq("-release", "17", "-deprecation", "-feature", "-unchecked",
  // Unused imports, privates, locals and parameters are errors: dead code does not pile up.
  "-Wunused:imports,privates,locals,patvars,implicits", "-Wconf:cat=unused:e")

/** Spark's jars, provided at run time by the Spark the plugin is loaded into. */
lazy val sparkJars = Def.setting {
  val dir = sys.env.get("SPARK_JARS_DIR").map(file).getOrElse(
    sys.error(
      "SPARK_JARS_DIR is not set: run sbt through dev/sbt, which points it at pyspark's jars"))
  val core = dir / s"spark-core_2.13-$sparkVersion.jar"
  if (!core.isFile) {
    sys.error(
      s"$dir holds no Spark $sparkVersion (no ${core.getName}); pyspark in pyproject.toml " +
        s"must be $sparkVersion too")
  }
  (dir * "*.jar").classpath
}

/** Spark Java options for forked JVMs on Java 17, as Spark's own launcher sets them. */
lazy val sparkJavaOptions = Seq(
  "-XX:+IgnoreUnrecognizedVMOptions",
  "--add-opens=java.base/java.lang=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
  "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
  "--add-opens=java.base/java.io=ALL-UNNAMED",
  "--add-opens=java.base/java.net=ALL-UNNAMED",
  "--add-opens=java.base/java.nio=ALL-UNNAMED",
  "--add-opens=java.base/java.util=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
  "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
  "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
  "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
  "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
  "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
  "-Djdk.reflect.useDirectMethodHandle=false",
  "-Dio.netty.tryReflectionSetAccessible=true")

/** Java sources generated from proto/ by dev/gen-proto, regenerated when a .proto changes. */
lazy val protoJavaSources = Def.task {
  val root = (ThisBuild / baseDirectory).value
  val out = (Compile / sourceManaged).value / "proto"
  val protos = ((root / "proto") ** "*.proto").get.toSet + root / "dev" / "gen-proto"
  val generate = FileFunction.cached(streams.value.cacheDirectory / "proto", FileInfo.hash) { _ =>
    val exit =
      scala.sys.process.Process(Seq((root / "dev" / "gen-proto").getPath, "java", out.getPath)).!
    if (exit != 0) sys.error(s"dev/gen-proto java failed with exit code $exit")
    (out ** "*.java").get.toSet
  }
  generate(protos).toSeq
}

lazy val plugin = (project in file("jvm"))
  .settings(
    name := "mapwithstate",
    Compile / unmanagedJars ++= sparkJars.value,
    Compile / sourceGenerators += protoJavaSources.taskValue,
    // The plugin's version, for what a checkpoint records about the code that wrote it
    // (io.mapwithstate.PluginVersion): generated from the one version above.
    Compile / resourceGenerators += Def.task {
      val file = (Compile / resourceManaged).value / "io" / "mapwithstate" / "version.properties"
      IO.write(file, s"version=${version.value}\n")
      Seq(file)
    }.taskValue,
    libraryDependencies ++= Seq(
      "org.scalatest" %% "scalatest" % "3.2.19" % Test),
    Test / fork := true,
    Test / javaOptions ++= sparkJavaOptions ++ Seq("-Xmx3g", "-Dspark.ui.enabled=false",
      s"-Dmapwithstate.root=${(ThisBuild / baseDirectory).value}"),
    Test / parallelExecution := false,
    Test / testOptions += Tests.Argument(TestFrameworks.ScalaTest, "-oD"),
    // The jar users pass to the Connect server: our classes and our generated proto classes.
    // Spark (and its relocated protobuf runtime) is provided by the server; so is Scala.
    assembly / assemblyJarName := s"mapwithstate-assembly-${version.value}.jar",
    assembly / assemblyPackageScala / assembleArtifact := false,
    assembly / assemblyExcludedJars := {
      val spark = sparkJars.value.map(_.data).toSet
      (assembly / fullClasspath).value.filter(jar => spark.contains(jar.data))
    },
    assembly / test := {})

// The benchmark's JVM systems (bench/): Spark's own stateful operators the plugin is measured
// against, run with spark-submit. A separate project so none of it goes into the plugin jar.
lazy val bench = (project in file("bench/jvm"))
  .settings(
    name := "mapwithstate-bench",
    Compile / unmanagedJars ++= sparkJars.value,
    // L1's producer (FixedRateProducer) is compiled against the kafka-clients that
    // dev/fetch-kafka fetches with Spark's Kafka connector (named there once), and run on the
    // Kafka broker's class path, which brings its own.
    libraryDependencies += "org.apache.kafka" % "kafka-clients" % kafkaClientsVersion % Provided)

lazy val kafkaClientsVersion: String = {
  val Assignment = """KAFKA_CLIENTS_VERSION=(\S+).*""".r
  IO.readLines(file("dev/fetch-kafka")).collectFirst { case Assignment(v) => v }
    .getOrElse(sys.error("dev/fetch-kafka names no KAFKA_CLIENTS_VERSION"))
}
